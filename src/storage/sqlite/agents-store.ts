import type { Database, Statement } from 'bun:sqlite'
import type { AgentChange, AgentProfileFields, AgentRecord } from '../../services/models/records.ts'
import type { AgentStore } from '../../services/ports.ts'
import { PROFILE_COLUMNS } from '../profile-columns.ts'

/** Rows kept in memory; every signed request reads its caller's record. */
const CACHE_MAX = 20_000

/**
 * A small cache of agent records shared by the reader and writer stores, least recently used first out,
 * in two generations: a hit in the young map costs one lookup (no reordering); a hit in the old one moves
 * the row to the young; when the young map is full it becomes the old one and the old one is dropped.
 * Writes drop the entry when they run and again after their commit, so a read that raced the write
 * cannot leave a stale copy behind.
 */
export class AgentCache {
  private young = new Map<string, AgentRecord>()
  private old = new Map<string, AgentRecord>()
  constructor(private readonly generation = CACHE_MAX / 2) {}
  get(key: string): AgentRecord | undefined {
    const hit = this.young.get(key)
    if (hit) return hit
    const aged = this.old.get(key)
    if (aged) this.set(key, aged)
    return aged
  }
  set(key: string, row: AgentRecord): void {
    this.old.delete(key)
    this.young.set(key, row)
    if (this.young.size >= this.generation) {
      this.old = this.young
      this.young = new Map()
    }
  }
  drop(key: string): void {
    this.young.delete(key)
    this.old.delete(key)
  }
  get size(): number {
    return this.young.size + this.old.size
  }
}

export const AGENT_COLUMNS = `public_key AS publicKey, display_name AS displayName, status, suspended_reason AS suspendedReason,
  visibility, inbox_policy AS inboxPolicy, metadata, capabilities, created_at AS createdAt, updated_at AS updatedAt,
  last_active_at AS lastActiveAt`


/** Agent records on one connection. `afterCommit` lets writes drop cached rows once they are durable. */
export class SqliteAgentStore implements AgentStore {
  private readonly countStmt: Statement<{ n: number }, []>
  private readonly byKey: Statement<AgentRecord, [string]>
  private readonly changed: Statement<AgentChange, [number]>
  private readonly insertStmt: Statement<unknown, [string, number, number, number]>
  private readonly insertCappedStmt: Statement<unknown, [string, number, number]>
  private readonly touchStmt: Statement<unknown, [number, string]>
  private readonly deleteStmt: Statement<unknown, [string]>
  private readonly suspendStmt: Statement<unknown, [string, string | null, number, number, number]>
  private readonly unsuspendStmt: Statement<unknown, [number, string]>
  private readonly updates = new Map<string, Statement>()

  /** A store of the unit of work (given `afterCommit`): it neither reads nor fills the cache, which holds committed rows only. */
  private readonly inUnitOfWork: boolean

  constructor(
    private readonly db: Database,
    private readonly cache: AgentCache,
    private readonly afterCommit?: (step: () => void) => void,
  ) {
    this.inUnitOfWork = afterCommit !== undefined
    this.countStmt = db.prepare('SELECT count(*) AS n FROM agents')
    this.byKey = db.prepare(`SELECT ${AGENT_COLUMNS} FROM agents WHERE public_key = ?`)
    // polled several times a second: reads only the updated_at index range
    this.changed = db.prepare('SELECT public_key AS publicKey, status, updated_at AS updatedAt FROM agents WHERE updated_at > ? ORDER BY updated_at')
    this.insertStmt = db.prepare(
      'INSERT INTO agents (public_key, created_at, updated_at, last_active_at) VALUES (?, ?, ?, ?) ON CONFLICT(public_key) DO NOTHING',
    )
    // the count and the insert in one statement, under the write lock: the cap is exact
    this.insertCappedStmt = db.prepare(
      `INSERT INTO agents (public_key, created_at, updated_at, last_active_at) SELECT ?1, ?2, ?2, ?2
       WHERE (SELECT count(*) FROM agents) < ?3 ON CONFLICT(public_key) DO NOTHING`,
    )
    this.touchStmt = db.prepare('UPDATE agents SET last_active_at = ? WHERE public_key = ?')
    this.deleteStmt = db.prepare('DELETE FROM agents WHERE public_key = ?')
    this.suspendStmt = db.prepare(`INSERT INTO agents (public_key, status, suspended_reason, created_at, updated_at, last_active_at)
      VALUES (?1, 'suspended', ?2, ?3, ?4, ?5)
      ON CONFLICT(public_key) DO UPDATE SET status = 'suspended', suspended_reason = excluded.suspended_reason, updated_at = excluded.updated_at`)
    this.unsuspendStmt = db.prepare(`UPDATE agents SET status = 'active', suspended_reason = NULL, updated_at = ? WHERE public_key = ?`)
  }

  async count(): Promise<number> {
    return this.countStmt.get()?.n ?? 0
  }

  async find(publicKey: string): Promise<AgentRecord | null> {
    return this.findNow(publicKey)
  }

  private findNow(publicKey: string): AgentRecord | null {
    // inside a unit of work the row may be uncommitted (and rolled back later): never cached
    if (this.inUnitOfWork) return this.byKey.get(publicKey)
    const hit = this.cache.get(publicKey)
    if (hit) return hit
    const row = this.byKey.get(publicKey)
    if (!row) return null
    this.cache.set(publicKey, row)
    return row
  }

  async create(publicKey: string, now: number): Promise<AgentRecord> {
    const existing = this.findNow(publicKey)
    if (existing) return existing
    this.insertStmt.run(publicKey, now, now, now)
    return this.findNow(publicKey) as AgentRecord
  }

  async createCapped(publicKey: string, now: number, maxAgents: number): Promise<AgentRecord | null> {
    const existing = this.findNow(publicKey)
    if (existing) return existing
    this.insertCappedStmt.run(publicKey, now, maxAgents)
    return this.findNow(publicKey)
  }

  async updateProfile(publicKey: string, fields: AgentProfileFields, now: number): Promise<void> {
    const names = (Object.keys(fields) as (keyof AgentProfileFields)[]).filter((k) => fields[k] !== undefined).sort()
    const shape = names.join(',')
    let stmt = this.updates.get(shape)
    if (!stmt) {
      const sets = names.map((n) => `${PROFILE_COLUMNS[n]} = $${n}`)
      stmt = this.db.prepare(`UPDATE agents SET ${[...sets, 'updated_at = $now'].join(', ')} WHERE public_key = $key`)
      this.updates.set(shape, stmt)
    }
    const params: Record<string, unknown> = { now, key: publicKey }
    for (const n of names) params[n] = fields[n]
    stmt.run(params as never)
    this.drop(publicKey)
  }

  async touch(publicKey: string, now: number): Promise<void> {
    this.touchStmt.run(now, publicKey)
    const show = () => {
      const cached = this.cache.get(publicKey)
      if (cached) cached.lastActiveAt = Math.max(cached.lastActiveAt, now)
    }
    if (this.afterCommit) this.afterCommit(show)
    else show()
  }

  async delete(publicKey: string): Promise<void> {
    this.deleteStmt.run(publicKey)
    this.drop(publicKey)
  }

  async suspend(publicKey: string, reason: string | null, now: number): Promise<void> {
    this.suspendStmt.run(publicKey, reason, now, now, now)
    this.drop(publicKey)
  }

  async unsuspend(publicKey: string, now: number): Promise<boolean> {
    const changed = this.unsuspendStmt.run(now, publicKey).changes > 0
    this.drop(publicKey)
    return changed
  }

  async changedSince(since: number): Promise<AgentChange[]> {
    return this.changed.all(since)
  }

  invalidate(publicKey: string): void {
    this.cache.drop(publicKey)
  }

  private drop(publicKey: string): void {
    this.cache.drop(publicKey)
    this.afterCommit?.(() => this.cache.drop(publicKey))
  }
}
