/**
 * Health and readiness (SPEC §10). Features register a probe per component; details reports each
 * with its figures, readiness requires the database and the blob directory to be writable.
 */
import type { Clock } from '../lib/clock.ts'
import { iso } from '../lib/clock.ts'

export type ComponentState = 'ok' | 'degraded' | 'down'
export interface ComponentReport {
  status: ComponentState
  [figure: string]: unknown
}
export type Probe = () => ComponentReport

export class HealthService {
  private readonly probes = new Map<string, Probe>()
  private readonly readiness = new Map<string, () => string | null>()

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
  readyCheck(name: string, check: () => string | null): void {
    this.readiness.set(name, check)
  }

  ready(): { ok: boolean; problems: Record<string, string> } {
    const problems: Record<string, string> = {}
    for (const [name, check] of this.readiness) {
      let problem: string | null
      try {
        problem = check()
      } catch (err) {
        problem = (err as Error).message
      }
      if (problem) problems[name] = problem
    }
    return { ok: Object.keys(problems).length === 0, problems }
  }

  details() {
    const components: Record<string, ComponentReport> = {}
    for (const [name, probe] of this.probes) {
      try {
        components[name] = probe()
      } catch (err) {
        components[name] = { status: 'down', error: (err as Error).message }
      }
    }
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
