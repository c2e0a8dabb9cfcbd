/**
 * Health and readiness (docs/protocol.md §10). Features register a probe per component; details reports each
 * with its figures, readiness requires the database and the blob directory to be writable.
 */
import type { Clock } from '../lib/clock.ts'
import { iso } from '../lib/clock.ts'

export type ComponentState = 'ok' | 'degraded' | 'down'
export interface ComponentReport {
  status: ComponentState
  [figure: string]: unknown
}
export type Probe = () => ComponentReport | Promise<ComponentReport>

/** A probe or readiness check that has not answered by then counts as failed (health answers promptly). */
const PROBE_TIMEOUT_MS = 1000

function withTimeout<T>(work: () => T | Promise<T>, late: T): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => resolve(late), PROBE_TIMEOUT_MS)
    Promise.resolve()
      .then(work)
      .then(resolve, reject)
      .finally(() => clearTimeout(timer))
  })
}

export class HealthService {
  private readonly probes = new Map<string, Probe>()
  private readonly readiness = new Map<string, () => string | null | Promise<string | null>>()

  constructor(
    private readonly clock: Clock,
    private readonly version: string,
    private readonly startedAtMs: number,
  ) {}

  /** A component of /v1/health/details. */
  component(name: string, probe: Probe): void {
    this.probes.set(name, probe)
  }

  /** A readiness check: returns null when fine, else the problem. */
  readyCheck(name: string, check: () => string | null | Promise<string | null>): void {
    this.readiness.set(name, check)
  }

  async ready(): Promise<{ ok: boolean; problems: Record<string, string> }> {
    const problems: Record<string, string> = {}
    await Promise.all(
      [...this.readiness].map(async ([name, check]) => {
        let problem: string | null
        try {
          problem = await withTimeout(check, 'did not answer in time')
        } catch (err) {
          problem = (err as Error).message
        }
        if (problem) problems[name] = problem
      }),
    )
    return { ok: Object.keys(problems).length === 0, problems }
  }

  async details() {
    const reports = await Promise.all(
      [...this.probes].map(async ([name, probe]): Promise<[string, ComponentReport]> => {
        try {
          return [name, await withTimeout<ComponentReport>(probe, { status: 'down', error: 'did not answer in time' })]
        } catch (err) {
          return [name, { status: 'down', error: (err as Error).message }]
        }
      }),
    )
    const components: Record<string, ComponentReport> = Object.fromEntries(reports)
    const states = Object.values(components).map((c) => c.status)
    const status: ComponentState = states.includes('down') ? 'down' : states.includes('degraded') ? 'degraded' : 'ok'
    return {
      status,
      version: this.version,
      timestamp: iso(this.clock.now()),
      uptime_s: Math.floor((performance.now() - this.startedAtMs) / 1000),
      components,
    }
  }
}
