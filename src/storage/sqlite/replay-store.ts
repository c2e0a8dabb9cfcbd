import type { Database, Statement } from 'bun:sqlite'
import { dirname, join } from 'node:path'
import type { ReplayReservation, ReplayStore } from '../../services/ports.ts'
import type { Logger } from '../../lib/logger.ts'
import { Checkpointer } from './checkpointer.ts'
import { closeConnection, openConnection, type Durability } from './database.ts'
import { SqliteUnitOfWork } from './unit-of-work.ts'
import { WalSync } from './wal-sync.ts'

/** The replay log's own file, beside the relay's database. */
export function replayLogPath(databasePath: string): string {
  return join(dirname(databasePath), 'replay.db')
}

interface ReplayTx {
  append(id: number, signature: string, expiresAt: number): void
  prune(lastId: number, rows: number): number
}

export interface SqliteReplayOptions {
  /** The relay's database; the log lives in `replay.db` beside it. */
  databasePath: string
  /** The relay's database (its writer): entries copied into its commits are read back at start-up. */
  main: Database
  /** Runs a write on the relay's database as a unit of work (pruning the copies kept there). */
  mainWrite: (op: () => void) => Promise<void>
  lockWaitMs: number
  durability: Durability
  logger: Logger
  now: number
  /** A command beside a running relay: no checkpoints of its own. */
  tool?: boolean
}

/**
 * The replay guard of one relay on SQLite. Lookups are in memory (loaded at start-up, so a signature
 * accepted before a restart or a kill -9 is still refused after it); each accepted signature is
 * appended to `replay.db`, a file of its own with its own group commit, so that another process holding
 * the write lock of the relay's database (`relay admin`, a backup, an sqlite3 shell) does not stop
 * signed reads: their only write is here.
 *
 * A request that also writes the relay's database must never have its effects on disk without its
 * replay entry, whatever crash comes between the two files. So every commit of relay.db carries, in
 * its own transaction, a copy of the entries not yet durable in replay.db (`copyInto`): the effects and
 * the entry reach the disk together, and the request waits for one sync, not two in a row. Once an
 * entry is durable in either file it is not copied again. Both files are read at start-up.
 *
 * Entries are appended in time order with increasing ids, so the expired ones are a prefix of each
 * log: a prune is a range delete on the primary key (in statements of a bounded size), however many
 * rows expired.
 */
/** A prefix of a log, `rows` at most per statement (each its own commit, so other writes come between). */
const PRUNE_SQL = 'DELETE FROM replay_log WHERE id IN (SELECT id FROM replay_log WHERE id <= ? ORDER BY id LIMIT ?)'

/** Rows per delete statement when the caller gives no limit. */
const DEFAULT_PRUNE_ROWS = 50_000

export class SqliteReplayStore implements ReplayStore {
  /** signature id → [row id, expiry (ms)], in insertion order (≈ expiry order). */
  private readonly seen = new Map<string, [number, number]>()
  private readonly db: Database
  readonly uow: SqliteUnitOfWork<ReplayTx>
  private readonly checkpointer: Checkpointer
  private readonly sync: WalSync | null
  private lastId: number
  /** Entries not yet durable in replay.db nor committed in relay.db: copied into its next commit. */
  private readonly uncovered = new Map<number, [string, number]>()
  /** Copies in relay.db, per commit: [last row id, latest expiry], oldest first. */
  private readonly copies: [number, number][] = []
  private readonly copyStmt: Statement<unknown, [string, number]>
  private readonly pruneCopies: Statement<unknown, [number, number]>
  /** Rows of replay.db up to this id are expired and not yet deleted (a prune that failed, or start-up). */
  private expiredUpTo = 0
  private closed = false

  constructor(private readonly opts: SqliteReplayOptions) {
    const path = replayLogPath(opts.databasePath)
    this.db = openConnection(path, 5000)
    this.db.run('CREATE TABLE IF NOT EXISTS replay_log (id INTEGER PRIMARY KEY, signature TEXT NOT NULL, expires_at INTEGER NOT NULL)')
    this.db.run('PRAGMA busy_timeout = 0')
    const append: Statement<unknown, [number, string, number]> = this.db.prepare('INSERT INTO replay_log (id, signature, expires_at) VALUES (?, ?, ?)')
    const prune: Statement<unknown, [number, number]> = this.db.prepare(PRUNE_SQL)
    this.sync = opts.durability === 'fsync' ? new WalSync(path) : null
    this.uow = new SqliteUnitOfWork<ReplayTx>(
      this.db,
      {
        append: (id, signature, expiresAt) => void append.run(id, signature, expiresAt),
        prune: (lastId, rows) => prune.run(lastId, rows).changes,
      },
      { lockWaitMs: opts.lockWaitMs, warn: (m, f) => opts.logger.warn(m, f), sync: this.sync ? () => this.sync!.sync() : undefined },
    )
    this.checkpointer = new Checkpointer(this.db, path, opts.logger).onWritersFree(() => this.uow.retryLockNow())
    if (!opts.tool) this.checkpointer.start()

    this.lastId = this.db.query<{ id: number | null }, []>('SELECT max(id) AS id FROM replay_log').get()?.id ?? 0
    this.copyStmt = opts.main.prepare('INSERT INTO replay_log (signature, expires_at) VALUES (?, ?)')
    this.pruneCopies = opts.main.prepare(PRUNE_SQL)
    const loaded: [string, number, number][] = []
    const own = this.db.query<{ id: number; signature: string; expires_at: number }, [number]>('SELECT id, signature, expires_at FROM replay_log WHERE expires_at > ? ORDER BY id')
    for (const row of own.iterate(opts.now)) loaded.push([row.signature, row.id, row.expires_at])
    this.expiredUpTo = this.db.query<{ id: number | null }, [number]>('SELECT max(id) AS id FROM replay_log WHERE expires_at <= ?').get(opts.now)?.id ?? 0
    const copied = opts.main.query<{ signature: string; expires_at: number }, [number]>('SELECT signature, expires_at FROM replay_log WHERE expires_at > ? ORDER BY id')
    for (const row of copied.iterate(opts.now)) loaded.push([row.signature, 0, row.expires_at])
    loaded.sort((x, y) => x[2] - y[2])
    for (const [signature, id, expiresAt] of loaded) {
      const known = this.seen.get(signature)
      this.seen.set(signature, [Math.max(id, known?.[0] ?? 0), expiresAt])
    }
    const tail = opts.main.query<{ id: number | null; expires_at: number | null }, []>('SELECT max(id) AS id, max(expires_at) AS expires_at FROM replay_log').get()
    if (tail?.id) this.copies.push([tail.id, tail.expires_at ?? 0])
  }

  async reserve(signatureId: string, expiresAt: number): Promise<ReplayReservation | null> {
    if (this.seen.has(signatureId)) return null
    const id = ++this.lastId
    this.seen.set(signatureId, [id, expiresAt])
    this.uncovered.set(id, [signatureId, expiresAt])
    const durable = this.uow.run(async (tx) => tx.append(id, signatureId, expiresAt)).then(
      () => void this.uncovered.delete(id),
      (err) => {
        this.uncovered.delete(id)
        this.seen.delete(signatureId) // not durable: let an honest retry through
        throw err
      },
    )
    return { durable }
  }

  /**
   * Called inside every transaction of the relay's database, just before its COMMIT: inserts the
   * entries not yet durable in replay.db, so that the commit carries the entries of the requests whose
   * effects it holds. `onCommit` registers what to do once the commit went through.
   */
  copyInto(onCommit: (step: () => void) => void): void {
    if (this.uncovered.size === 0) return
    const ids = [...this.uncovered.keys()]
    let latest = 0
    let rowId = 0
    for (const [signature, expiresAt] of this.uncovered.values()) {
      rowId = Number(this.copyStmt.run(signature, expiresAt).lastInsertRowid)
      if (expiresAt > latest) latest = expiresAt
    }
    onCommit(() => {
      for (const id of ids) this.uncovered.delete(id)
      this.copies.push([rowId, latest])
    })
  }

  /**
   * Forgets expired entries in memory and in both logs: range deletes on the primary key, `limit` rows
   * per statement, until every expired row is gone however many there are. A delete that fails (a
   * locked relay.db) is tried again at the next prune.
   */
  async prune(now: number, rows = DEFAULT_PRUNE_ROWS): Promise<number> {
    const limit = Math.max(1, rows)
    for (const [signature, [id, expiresAt]] of this.seen) {
      if (expiresAt > now) break
      this.seen.delete(signature)
      if (id > this.expiredUpTo) this.expiredUpTo = id
    }
    let copiedUpTo = 0
    let newest = 0
    while (this.copies.length > 0 && this.copies[0][1] <= now) [copiedUpTo, newest] = this.copies.shift()!
    let removed = 0
    if (copiedUpTo > 0) {
      try {
        for (let n = limit; n >= limit; removed += n) {
          n = 0
          await this.opts.mainWrite(() => void (n = this.pruneCopies.run(copiedUpTo, limit).changes))
        }
      } catch (err) {
        this.copies.unshift([copiedUpTo, newest])
        throw err
      }
    }
    const upTo = this.expiredUpTo
    if (upTo > 0) {
      for (let n = limit; n >= limit; removed += n) n = await this.uow.run(async (tx) => tx.prune(upTo, limit))
      if (this.expiredUpTo === upTo) this.expiredUpTo = 0
    }
    return removed
  }

  /** Entries held in memory (tests, health). */
  get size(): number {
    return this.seen.size
  }

  /** Rows in the log file (tests, benches). */
  rows(): number {
    return this.db.query<{ n: number }, []>('SELECT count(*) AS n FROM replay_log').get()!.n
  }

  report() {
    return { entries: this.seen.size, commits: this.uow.stats.commits, lock_timeouts: this.uow.stats.lock_timeouts, checkpoints: this.checkpointer.report() }
  }

  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    await this.uow.drain()
    await this.checkpointer.stop()
    try {
      if (!this.opts.tool) this.db.run('PRAGMA wal_checkpoint(TRUNCATE)')
    } catch (err) {
      this.opts.logger.warn('replay log checkpoint failed', { error: String(err) })
    }
    this.sync?.close()
    closeConnection(this.db)
  }
}
