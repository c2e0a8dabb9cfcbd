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
  prune(lastId: number): number
}

export interface SqliteReplayOptions {
  /** The relay's database; the log lives in `replay.db` beside it. */
  databasePath: string
  /** The relay's database, read for entries written there by earlier versions. */
  legacy: Database
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
 * signed reads: their only write is here. The relay's own commits wait for the entries reserved before
 * them to be committed first (see `settled`), so a request's effects are never on disk without its
 * replay entry, whatever crash comes between.
 *
 * Entries are appended in time order with increasing ids, so the expired ones are a prefix of the log:
 * a prune is one range delete on the primary key, however many rows expired.
 */
export class SqliteReplayStore implements ReplayStore {
  /** signature id → [row id, expiry (ms)], in insertion order (≈ expiry order). */
  private readonly seen = new Map<string, [number, number]>()
  private readonly db: Database
  readonly uow: SqliteUnitOfWork<ReplayTx>
  private readonly checkpointer: Checkpointer
  private readonly sync: WalSync | null
  private lastId: number
  /** Settles once every entry reserved so far is committed (and synced, in fsync mode) or failed. */
  private last: Promise<void> = Promise.resolve()
  private closed = false

  constructor(private readonly opts: SqliteReplayOptions) {
    const path = replayLogPath(opts.databasePath)
    this.db = openConnection(path, 5000)
    this.db.run('CREATE TABLE IF NOT EXISTS replay_log (id INTEGER PRIMARY KEY, signature TEXT NOT NULL, expires_at INTEGER NOT NULL)')
    this.db.run('PRAGMA busy_timeout = 0')
    const append: Statement<unknown, [number, string, number]> = this.db.prepare('INSERT INTO replay_log (id, signature, expires_at) VALUES (?, ?, ?)')
    const prune: Statement<unknown, [number]> = this.db.prepare('DELETE FROM replay_log WHERE id <= ?')
    this.sync = opts.durability === 'fsync' ? new WalSync(path) : null
    this.uow = new SqliteUnitOfWork<ReplayTx>(
      this.db,
      {
        append: (id, signature, expiresAt) => void append.run(id, signature, expiresAt),
        prune: (lastId) => prune.run(lastId).changes,
      },
      { lockWaitMs: opts.lockWaitMs, warn: (m, f) => opts.logger.warn(m, f), sync: this.sync ? () => this.sync!.sync() : undefined },
    )
    this.checkpointer = new Checkpointer(this.db, path, opts.logger)
    if (!opts.tool) this.checkpointer.start()

    this.lastId = this.db.query<{ id: number | null }, []>('SELECT max(id) AS id FROM replay_log').get()?.id ?? 0
    // entries an earlier version kept in the relay's database: moved here once (a tool only reads them)
    const legacy = opts.legacy
      .query<{ signature: string; expires_at: number }, [number]>('SELECT signature, expires_at FROM replay_log WHERE expires_at > ? ORDER BY id')
      .all(opts.now)
    if (opts.tool) {
      for (const row of legacy) this.seen.set(row.signature, [0, row.expires_at])
    } else if (legacy.length > 0) {
      this.db.transaction(() => {
        for (const row of legacy) append.run(++this.lastId, row.signature, row.expires_at)
      })()
      try {
        opts.legacy.run('DELETE FROM replay_log')
      } catch {
        // locked by another process: moved again (harmlessly) at the next start
      }
    }
    const own = this.db.query<{ id: number; signature: string; expires_at: number }, [number]>('SELECT id, signature, expires_at FROM replay_log WHERE expires_at > ? ORDER BY id')
    for (const row of own.iterate(opts.now)) this.seen.set(row.signature, [row.id, row.expires_at])
  }

  async reserve(signatureId: string, expiresAt: number): Promise<ReplayReservation | null> {
    if (this.seen.has(signatureId)) return null
    const id = ++this.lastId
    this.seen.set(signatureId, [id, expiresAt])
    const durable = this.uow.run(async (tx) => tx.append(id, signatureId, expiresAt)).catch((err) => {
      this.seen.delete(signatureId) // not durable: let an honest retry through
      throw err
    })
    this.last = durable.catch(() => {})
    return { durable }
  }

  /**
   * Settles once every entry reserved so far has been committed (synced to disk in fsync mode) or has
   * failed: the relay's database commits only after it, so the effects of a request never reach the
   * disk before its replay entry does.
   */
  settled(): Promise<void> {
    return this.last
  }

  /**
   * Forgets expired entries in memory and in the log: one range delete on the primary key, whatever
   * their number. `limit` is not needed (the delete costs microseconds per row and runs in this
   * file's own transaction, beside nothing else).
   */
  async prune(now: number, _limit?: number): Promise<number> {
    let last = 0
    for (const [signature, [id, expiresAt]] of this.seen) {
      if (expiresAt > now) break
      this.seen.delete(signature)
      if (id > last) last = id
    }
    if (last === 0) return 0
    return this.uow.run(async (tx) => tx.prune(last))
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
