import { eq } from 'drizzle-orm'
import type { Db } from './db.ts'
import { agents } from './schema.ts'

export type AgentRow = typeof agents.$inferSelect
export type AgentProfileFields = Partial<
  Pick<AgentRow, 'displayName' | 'visibility' | 'inboxPolicy' | 'metadata' | 'capabilities'>
>

/** Rows kept in memory; every signed request reads its caller's row. */
const CACHE_MAX = 20_000

/**
 * Agent records. Methods take `now` from the caller; no rule lives here. Rows are cached in memory
 * (LRU); every write through this repository updates or drops the cached row, and changes made by
 * another process (`relay admin`) are dropped by `invalidate` from the relay's change watcher.
 */
export class AgentsRepo {
  private readonly byKey
  private readonly cache = new Map<string, AgentRow>()
  private readonly changed
  constructor(private readonly db: Db) {
    // polled several times a second: prepared once, reads only the updated_at index range
    this.changed = db.$client.prepare<{ publicKey: string; status: AgentRow['status']; updatedAt: number }, [number]>(
      'SELECT public_key AS publicKey, status, updated_at AS updatedAt FROM agents WHERE updated_at > ? ORDER BY updated_at',
    )
    this.byKey = db.$client.prepare<Record<string, unknown>, [string]>('SELECT * FROM agents WHERE public_key = ?')
  }

  find(publicKey: string): AgentRow | undefined {
    const hit = this.cache.get(publicKey)
    if (hit) {
      this.cache.delete(publicKey)
      this.cache.set(publicKey, hit)
      return hit
    }
    const raw = this.byKey.get(publicKey)
    if (!raw) return undefined
    const row = fromRaw(raw)
    this.cache.set(publicKey, row)
    if (this.cache.size > CACHE_MAX) this.cache.delete(this.cache.keys().next().value as string)
    return row
  }

  /** Drops a cached row so the next read comes from the database. */
  invalidate(publicKey: string): void {
    this.cache.delete(publicKey)
  }

  /** Records activity in memory at once; `touch` persists it (coalesced by the caller). */
  markActive(publicKey: string, now: number): void {
    const row = this.cache.get(publicKey)
    if (row) row.lastActiveAt = now
  }

  /** Creates an agent with the defaults of SPEC §2.1 unless it exists; returns the stored row. */
  findOrCreate(publicKey: string, now: number): AgentRow {
    const existing = this.find(publicKey)
    if (existing) return existing
    this.db
      .insert(agents)
      .values({ publicKey, createdAt: now, updatedAt: now, lastActiveAt: now })
      .onConflictDoNothing()
      .run()
    return this.find(publicKey) as AgentRow
  }

  updateProfile(publicKey: string, fields: AgentProfileFields, now: number): void {
    this.db.update(agents).set({ ...fields, updatedAt: now }).where(eq(agents.publicKey, publicKey)).run()
    this.invalidate(publicKey)
  }

  touch(publicKey: string, now: number): void {
    this.db.update(agents).set({ lastActiveAt: now }).where(eq(agents.publicKey, publicKey)).run()
  }

  delete(publicKey: string): void {
    this.db.delete(agents).where(eq(agents.publicKey, publicKey)).run()
    this.invalidate(publicKey)
  }

  /** Suspends a key, creating a suspended record for an unknown one (SPEC §2.3). */
  suspend(publicKey: string, reason: string | null, now: number): void {
    this.db
      .insert(agents)
      .values({ publicKey, status: 'suspended', suspendedReason: reason, createdAt: now, updatedAt: now, lastActiveAt: now })
      .onConflictDoUpdate({ target: agents.publicKey, set: { status: 'suspended', suspendedReason: reason, updatedAt: now } })
      .run()
    this.invalidate(publicKey)
  }

  /** Returns false when the key has no record. */
  unsuspend(publicKey: string, now: number): boolean {
    const res = this.db.$client.run(
      `UPDATE agents SET status = 'active', suspended_reason = NULL, updated_at = ? WHERE public_key = ?`,
      [now, publicKey],
    )
    this.invalidate(publicKey)
    return res.changes > 0
  }

  /** Agents changed after `since` (ms), e.g. by `relay admin` in another process. */
  changedSince(since: number): { publicKey: string; status: AgentRow['status']; updatedAt: number }[] {
    return this.changed.all(since)
  }
}

function fromRaw(r: Record<string, unknown>): AgentRow {
  return {
    publicKey: r.public_key as string,
    displayName: r.display_name as string | null,
    status: r.status as AgentRow['status'],
    suspendedReason: r.suspended_reason as string | null,
    visibility: r.visibility as AgentRow['visibility'],
    inboxPolicy: r.inbox_policy as AgentRow['inboxPolicy'],
    metadata: r.metadata as string,
    capabilities: r.capabilities as string,
    createdAt: r.created_at as number,
    updatedAt: r.updated_at as number,
    lastActiveAt: r.last_active_at as number,
  }
}
