/**
 * Units of work on the SQLite writer connection, committed in groups.
 *
 * Every unit queued during one turn of the event loop runs in one `BEGIN IMMEDIATE … COMMIT`. Under
 * load many requests share one commit instead of paying one each; a lone request waits one turn. Each
 * unit's promise settles only after the commit, so nothing is answered before it is durable.
 *
 * A group first runs optimistically, its units one after the other with nothing between them. When
 * one of them throws, the whole transaction is rolled back and the group runs again carefully: each
 * unit inside a savepoint of its own, so the failing one is rolled back alone and the others commit.
 * (A savepoint copies every page a unit touches into a statement journal: a few µs per unit, which the
 * optimistic pass saves when nothing fails.) After a failure the next groups run carefully at once,
 * so units that keep failing cost one pass, not two. Units are therefore run more than once at times;
 * they act only through their stores, and a run that was rolled back leaves nothing behind.
 *
 * The event loop never waits on the lock: the connection's busy timeout is zero, and when another
 * process holds the write lock (`relay admin`, a backup, an operator's sqlite3 shell), BEGIN is retried
 * on timers — the relay keeps serving reads meanwhile — until `lockWaitMs` has passed; then the units
 * of the group fail with 503 and a Retry-After. Units queued meanwhile wait for the next group.
 *
 * Two hooks tie the commits to the outside: `beforeCommit` adds rows to every group's transaction
 * (the replay entries the commit must carry), and in fsync mode the units are answered only after
 * `sync` has made their commit durable; the next group commits meanwhile, so syncs overlap with the
 * work of the following turns.
 *
 * A unit must only wait on its stores (which run synchronously on this connection and return settled
 * promises), so a group runs within one turn; a unit that awaits real I/O holds the write lock across
 * turns and is reported in the log.
 */
import type { Database, Statement } from 'bun:sqlite'
import { RelayError } from '../../errors.ts'
import { databaseBusy, mapSqliteError, sqliteCode } from './errors.ts'
import { settleJobs, type UnitJob as Job } from '../unit-job.ts'

export interface UnitOfWorkOptions {
  /** How long writes wait for another process's write lock before failing with 503. */
  lockWaitMs: number
  /** A group this large commits without waiting for the end of the turn. */
  maxBatch?: number
  /** Reports oddities (a unit that waited on I/O, a failed rollback). */
  warn?: (message: string, fields?: Record<string, unknown>) => void
  /**
   * Runs inside every group's transaction after its units, just before COMMIT (the replay entries the
   * commit must carry, see replay-store.ts); may register steps with `onCommit`. A throw fails the group.
   */
  beforeCommit?: () => void
  /**
   * Makes a commit durable (fsync mode: a sync of the WAL, see wal-sync.ts). The group's units are
   * answered once it resolves; the next group may commit meanwhile.
   */
  sync?: () => Promise<void>
}

/** Groups that run carefully (a savepoint per unit) after one whose optimistic pass failed. */
const CAREFUL_GROUPS_AFTER_FAILURE = 64

/** Pauses between attempts to take the write lock: short at first, then every 50 ms. */
const RETRY_DELAYS_MS = [2, 5, 10, 20, 50]

export class SqliteUnitOfWork<S> {
  private queue: Job<S>[] = []
  private scheduled = false
  private running = false
  private readonly afterCommit: (() => void)[] = []
  private readonly stmt: Record<'begin' | 'commit' | 'rollback' | 'savepoint' | 'release' | 'rollbackTo', Statement>
  private readonly maxBatch: number
  /** Groups left to run carefully (see the header). */
  private careful = 0
  /** Commits made, groups run again carefully, waits for a write lock held elsewhere, and groups refused because it stayed taken (health figures). */
  readonly stats = { commits: 0, units: 0, reruns: 0, lock_waits: 0, lock_timeouts: 0, sync_failures: 0 }
  /** Syncs of committed groups not yet returned (fsync mode). */
  private readonly syncing = new Set<Promise<void>>()
  /** Ends the current wait for the write lock early (see `retryLockNow`). */
  private wakeLockWait: (() => void) | null = null

  constructor(
    private readonly db: Database,
    private readonly stores: S,
    private readonly opts: UnitOfWorkOptions,
  ) {
    this.maxBatch = opts.maxBatch ?? 1000
    this.stmt = {
      begin: db.prepare('BEGIN IMMEDIATE'),
      commit: db.prepare('COMMIT'),
      rollback: db.prepare('ROLLBACK'),
      savepoint: db.prepare('SAVEPOINT unit'),
      release: db.prepare('RELEASE unit'),
      rollbackTo: db.prepare('ROLLBACK TO unit'),
    }
  }

  /** Queues a unit of work; resolves with its result once committed, rejects if it (or the commit) failed. */
  run<T>(fn: (tx: S) => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ fn, resolve, reject })
      this.schedule()
    })
  }

  /** Registers a step to run after the current group commits (e.g. dropping a cached row). */
  onCommit(step: () => void): void {
    this.afterCommit.push(step)
  }

  /**
   * The write lock was just let go by a holder in this process (the checkpoint worker's RESTART or
   * TRUNCATE, which hold writers off): a group waiting for it tries again now instead of at its next timer.
   */
  retryLockNow(): void {
    this.wakeLockWait?.()
  }

  /** Units queued and not yet committed. */
  get waiting(): number {
    return this.queue.length
  }

  /** Resolves once every unit queued so far has committed or failed (a graceful stop). */
  async drain(): Promise<void> {
    while (this.queue.length > 0 || this.running) {
      if (!this.running) await this.pump()
      else await new Promise((r) => setTimeout(r, 5))
    }
    await Promise.all(this.syncing)
  }

  private schedule(): void {
    if (this.scheduled || this.running) return
    this.scheduled = true
    if (this.queue.length >= this.maxBatch) queueMicrotask(() => this.pump())
    else setImmediate(() => this.pump())
  }

  private async pump(): Promise<void> {
    this.scheduled = false
    if (this.running || this.queue.length === 0) return
    this.running = true
    const batch = this.queue.splice(0, this.maxBatch)
    try {
      await this.execute(batch)
    } finally {
      this.running = false
      if (this.queue.length) this.schedule()
    }
  }

  private async execute(batch: Job<S>[]): Promise<void> {
    if (!(await this.lock(batch))) return
    let crossedTurn = false
    const watch = setImmediate(() => (crossedTurn = true))
    try {
      if (batch.length > 1 && this.careful === 0 && !(await this.runOptimistic(batch))) {
        this.stats.reruns++
        this.careful = CAREFUL_GROUPS_AFTER_FAILURE
        if (!(await this.lock(batch))) return
      }
      if (batch.length === 1 || this.careful > 0) {
        if (this.careful > 0) this.careful--
        if (!(await this.runCareful(batch))) return
      }
    } finally {
      clearImmediate(watch)
    }
    if (crossedTurn) this.opts.warn?.('a unit of work waited across event-loop turns while holding the write lock', { units: batch.length })
    this.stats.commits++
    this.stats.units += batch.length
    const steps = this.afterCommit.splice(0)
    for (const step of steps) step()
    const settle = () => settleJobs(batch)
    if (!this.opts.sync) return settle()
    const synced = this.opts.sync().then(settle, (err) => {
      this.stats.sync_failures++
      this.opts.warn?.('syncing a commit to disk failed', { error: String(err) })
      const failed = new RelayError('service_unavailable', 'Storage is unavailable; retry later', null, { 'Retry-After': '5' })
      for (const job of batch) job.reject(job.ok ? failed : job.error)
    })
    this.syncing.add(synced)
    synced.finally(() => this.syncing.delete(synced))
  }

  /**
   * Runs every unit with nothing between them and commits: true when all succeeded and the commit
   * went through. Otherwise everything is rolled back (nothing of the group is kept) and false.
   */
  private async runOptimistic(batch: Job<S>[]): Promise<boolean> {
    try {
      for (const job of batch) {
        job.value = await job.fn(this.stores)
        job.ok = true
      }
      this.opts.beforeCommit?.()
      this.stmt.commit.run()
      return true
    } catch {
      this.abandon()
      for (const job of batch) {
        job.ok = undefined
        job.value = undefined
      }
      return false
    }
  }

  /**
   * Runs the units (each in a savepoint when there are several) and commits; false when the group
   * failed as a whole (its units rejected): a failed single unit, or a failure of the transaction
   * itself (a full disk at COMMIT).
   */
  private async runCareful(batch: Job<S>[]): Promise<boolean> {
    const single = batch.length === 1
    try {
      for (const job of batch) {
        if (!single) this.stmt.savepoint.run()
        try {
          job.value = await job.fn(this.stores)
          job.ok = true
          if (!single) this.stmt.release.run()
        } catch (err) {
          job.error = mapSqliteError(err)
          // a full disk, an I/O error or a lock can make SQLite roll back the whole transaction: then
          // every unit of the group is lost with it
          if (single || !this.db.inTransaction) throw err
          this.stmt.rollbackTo.run()
          this.stmt.release.run()
        }
      }
      this.opts.beforeCommit?.()
      this.stmt.commit.run()
      return true
    } catch (err) {
      this.abandon()
      const mapped = mapSqliteError(err)
      for (const job of batch) job.reject(!single && job.error !== undefined ? job.error : mapped)
      return false
    }
  }

  /** Takes the write lock for `batch`; when it stays taken elsewhere, rejects every unit and false. */
  private async lock(batch: Job<S>[]): Promise<boolean> {
    const locked = await this.begin()
    if (locked === null) return true
    this.stats.lock_timeouts++
    for (const job of batch) job.reject(locked)
    return false
  }

  /** Rolls the open transaction back with the steps its units registered for after the commit. */
  private abandon(): void {
    this.rollback()
    this.afterCommit.length = 0
  }

  /** Takes the write lock, retrying on timers while another connection holds it; null when taken, else the error. */
  private async begin(): Promise<unknown | null> {
    const deadline = performance.now() + this.opts.lockWaitMs
    for (let attempt = 0; ; attempt++) {
      try {
        this.stmt.begin.run()
        return null
      } catch (err) {
        const code = sqliteCode(err)
        if (code !== 'SQLITE_BUSY' && code !== 'SQLITE_LOCKED') return mapSqliteError(err)
        if (attempt === 0) this.stats.lock_waits++
        const wait = RETRY_DELAYS_MS[Math.min(attempt, RETRY_DELAYS_MS.length - 1)]
        if (performance.now() + wait > deadline) return databaseBusy()
        await new Promise<void>((resolve) => {
          const done = () => {
            clearTimeout(timer)
            this.wakeLockWait = null
            resolve()
          }
          const timer = setTimeout(done, wait)
          this.wakeLockWait = done
        })
      }
    }
  }

  private rollback(): void {
    try {
      if (this.db.inTransaction) this.stmt.rollback.run()
    } catch (err) {
      this.opts.warn?.('rollback failed', { error: String(err) })
    }
  }
}
