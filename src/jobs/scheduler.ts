/**
 * In-process periodic jobs on croner. Each job is a `runOnce(now)` step of a service; runs of one job
 * never overlap (croner `protect`), a failing run is logged and never crashes the process, and the
 * last run of each job is reported by health details.
 */
import { Cron } from 'croner'
import type { Clock } from '../lib/clock.ts'
import { iso } from '../lib/clock.ts'
import type { Logger } from '../lib/logger.ts'

export type JobStep = (now: number) => unknown | Promise<unknown>

/** Runs a job's step unless another instance runs the job with that name (Storage.exclusive). */
export type ExclusiveRunner = <T>(job: string, fn: () => Promise<T>) => Promise<{ ran: true; value: T } | { ran: false }>

export interface JobOptions {
  /**
   * One instance at a time in a cluster (sweeps, expiry): the run is skipped while another instance
   * holds the job. Jobs whose work is claimed row by row (webhook dispatch) run everywhere.
   */
  exclusive?: boolean
}

interface JobState {
  name: string
  intervalMs: number
  step: JobStep
  exclusive: boolean
  cron?: Cron
  running?: Promise<void>
  lastRunAt?: number
  lastDurationMs?: number
  lastError?: string
  lastResult?: unknown
  runs: number
}

export class Scheduler {
  private readonly jobs = new Map<string, JobState>()
  private started = false

  constructor(
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly onRun?: (name: string, durationMs: number, ok: boolean) => void,
    private readonly exclusiveRunner?: ExclusiveRunner,
  ) {}

  add(name: string, intervalMs: number, step: JobStep, opts: JobOptions = {}): void {
    const job: JobState = { name, intervalMs, step, exclusive: opts.exclusive === true, runs: 0 }
    this.jobs.set(name, job)
    if (this.started) this.schedule(job)
  }

  /** Runs one job now (also what the schedule calls); resolves when the run ends. */
  async runNow(name: string): Promise<unknown> {
    const job = this.jobs.get(name)
    if (!job) throw new Error(`no job ${name}`)
    if (job.running) await job.running
    let result: unknown
    job.running = (async () => {
      const started = performance.now()
      const now = this.clock.now()
      let ok = true
      try {
        if (job.exclusive && this.exclusiveRunner) {
          const outcome = await this.exclusiveRunner(name, async () => job.step(now))
          result = outcome.ran ? outcome.value : { skipped: 'running on another instance' }
        } else {
          result = await job.step(now)
        }
        job.lastError = undefined
        job.lastResult = result
      } catch (err) {
        ok = false
        job.lastError = (err as Error)?.message ?? String(err)
        this.logger.error('job failed', { job: name, error: job.lastError, stack: (err as Error)?.stack })
      } finally {
        job.lastRunAt = now
        job.lastDurationMs = performance.now() - started
        job.runs++
        this.onRun?.(name, job.lastDurationMs, ok)
        if (this.logger.enabled('debug')) {
          this.logger.debug('job run', { job: name, duration_ms: Math.round(job.lastDurationMs), result })
        }
      }
    })()
    await job.running
    job.running = undefined
    return result
  }

  start(): void {
    this.started = true
    for (const job of this.jobs.values()) this.schedule(job)
  }

  private schedule(job: JobState): void {
    // croner's finest step is one second; sub-second intervals (tests) round up to it
    const seconds = Math.max(1, Math.round(job.intervalMs / 1000))
    job.cron = new Cron('* * * * * *', { interval: seconds, protect: true, unref: true, catch: true }, () =>
      void this.runNow(job.name),
    )
  }

  /** Stops scheduling and waits for runs in progress. */
  async stop(): Promise<void> {
    this.started = false
    for (const job of this.jobs.values()) job.cron?.stop()
    await Promise.all([...this.jobs.values()].map((j) => j.running))
  }

  report(): Record<string, unknown> {
    const out: Record<string, unknown> = {}
    for (const job of this.jobs.values()) {
      out[job.name] = {
        interval_ms: job.intervalMs,
        runs: job.runs,
        last_run_at: job.lastRunAt === undefined ? null : iso(job.lastRunAt),
        last_duration_ms: job.lastDurationMs === undefined ? null : Math.round(job.lastDurationMs * 100) / 100,
        last_error: job.lastError ?? null,
      }
    }
    return out
  }

  hasFailures(): boolean {
    return [...this.jobs.values()].some((j) => j.lastError)
  }
}
