/**
 * Grouped units of work on PostgreSQL (`transaction(fn, { grouped: true })`: accepting a message).
 *
 * The grouped units queued during one turn of the event loop share one transaction: one BEGIN, one
 * COMMIT, and their statements sent together on its connection (Bun.SQL pipelines the statements of
 * units that run concurrently), instead of a transaction and a connection each. Each unit's promise
 * settles only after the commit, so nothing is answered before it is durable. Several groups may be
 * under way at once (`maxInFlight`); units queued meanwhile wait for the next group.
 *
 * As on SQLite (sqlite/unit-of-work.ts), a group first runs optimistically: every unit at once, nothing
 * between them. When one of them fails, the transaction is rolled back and the group runs again
 * carefully: its units one after the other, each inside a savepoint, so the failing one is rolled back
 * alone and the others commit. After a failure the next groups run carefully at once. A group of one
 * runs as a plain transaction.
 */
import type { SQL } from 'bun'
import { settleJobs, type UnitJob as Job } from '../unit-job.ts'

/** Runs `fn` as one transaction (retries, error mapping and after-commit steps included). */
export type RunTransaction<S> = <T>(fn: (tx: S, db: SQL) => Promise<T>) => Promise<T>

export interface GroupCommitOptions {
  /** Groups under way at once (each holds a connection until its commit). */
  maxInFlight: number
  /** Units in one group at most. */
  maxBatch?: number
  /** Maps a driver error of one unit as the storage maps every error. */
  mapError: (err: unknown) => unknown
}

/**
 * Groups that run carefully (a savepoint per unit) after one whose optimistic pass failed. Fewer than on
 * SQLite: here a careful group costs round trips (its units one after the other), not microseconds.
 */
const CAREFUL_GROUPS_AFTER_FAILURE = 4

export class PgGroupCommit<S> {
  private queue: Job<S>[] = []
  private scheduled = false
  private inFlight = 0
  private careful = 0
  private readonly maxBatch: number
  /** Groups committed, units in them, groups run again carefully (health figures). */
  readonly stats = { groups: 0, units: 0, reruns: 0 }

  constructor(
    private readonly transaction: RunTransaction<S>,
    private readonly opts: GroupCommitOptions,
  ) {
    this.maxBatch = opts.maxBatch ?? 500
  }

  run<T>(fn: (tx: S) => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ fn, resolve, reject })
      this.schedule()
    })
  }

  /** Resolves once every unit queued so far has committed or failed (a graceful stop). */
  async drain(): Promise<void> {
    while (this.queue.length > 0 || this.inFlight > 0) {
      if (!this.scheduled) this.schedule()
      await new Promise((r) => setTimeout(r, 5))
    }
  }

  private schedule(): void {
    if (this.scheduled || this.inFlight >= this.opts.maxInFlight || this.queue.length === 0) return
    this.scheduled = true
    setImmediate(() => this.pump())
  }

  private pump(): void {
    this.scheduled = false
    while (this.inFlight < this.opts.maxInFlight && this.queue.length > 0) {
      const batch = this.queue.splice(0, this.maxBatch)
      this.inFlight++
      void this.execute(batch).finally(() => {
        this.inFlight--
        this.schedule()
      })
    }
  }

  private async execute(batch: Job<S>[]): Promise<void> {
    if (batch.length === 1) {
      const job = batch[0]
      return this.transaction((tx) => job.fn(tx)).then((value) => {
        this.settled(batch)
        job.resolve(value)
      }, job.reject)
    }
    if (this.careful === 0) {
      try {
        const values = await this.transaction((tx) => this.runOptimistic(batch, tx))
        this.settled(batch)
        batch.forEach((job, i) => job.resolve(values[i]))
        return
      } catch {
        this.stats.reruns++
        this.careful = CAREFUL_GROUPS_AFTER_FAILURE
      }
    } else {
      this.careful--
    }
    try {
      await this.transaction((tx, db) => this.runCareful(batch, tx, db))
    } catch (err) {
      // the transaction itself failed (its commit, the connection): every unit of it is lost
      for (const job of batch) job.reject(job.error ?? err)
      return
    }
    this.settled(batch)
    settleJobs(batch)
  }

  private settled(batch: Job<S>[]): void {
    this.stats.groups++
    this.stats.units += batch.length
  }

  /** Every unit at once; throws (rolling the group back) when any of them failed, once all have ended. */
  private async runOptimistic(batch: Job<S>[], tx: S): Promise<unknown[]> {
    const results = await Promise.allSettled(batch.map((job) => job.fn(tx)))
    const failed = results.find((r) => r.status === 'rejected')
    if (failed) throw (failed as PromiseRejectedResult).reason
    return results.map((r) => (r as PromiseFulfilledResult<unknown>).value)
  }

  /** One unit after the other, each in a savepoint: a failing unit is rolled back alone. */
  private async runCareful(batch: Job<S>[], tx: S, db: SQL): Promise<void> {
    for (const job of batch) {
      // the transaction may run more than once (a deadlock broken, a connection lost before COMMIT)
      job.ok = undefined
      job.value = undefined
      job.error = undefined
    }
    for (const job of batch) {
      await db.unsafe('SAVEPOINT unit')
      try {
        job.value = await job.fn(tx)
        job.ok = true
        await db.unsafe('RELEASE SAVEPOINT unit')
      } catch (err) {
        // a deadlock or a lost connection ends the whole transaction: it runs again (or fails) as a whole
        if (!unitAlone(err)) throw err
        job.error = this.opts.mapError(err)
        await db.unsafe('ROLLBACK TO SAVEPOINT unit')
        await db.unsafe('RELEASE SAVEPOINT unit')
      }
    }
  }
}

/** A failure that concerns the unit alone (its own error, a constraint), not the transaction or its connection. */
function unitAlone(err: unknown): boolean {
  const e = err as { errno?: unknown; code?: unknown }
  const state = typeof e?.errno === 'string' ? e.errno : ''
  // 40xxx: deadlock, serialization; 08xxx: connection; 57xxx: operator intervention; 53xxx: resources
  if (state) return !/^(40|08|57|53)/.test(state)
  const code = typeof e?.code === 'string' ? e.code : ''
  return !(code.startsWith('ERR_POSTGRES_') || code === 'ECONNRESET' || code === 'ECONNREFUSED' || code === 'ETIMEDOUT' || code === 'EPIPE')
}
