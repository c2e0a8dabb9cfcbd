import { and, eq, gt, sql } from 'drizzle-orm'
import type { Db } from './db.ts'
import { agents } from './schema.ts'

export type AgentRow = typeof agents.$inferSelect
export type AgentProfileFields = Partial<
  Pick<AgentRow, 'displayName' | 'visibility' | 'inboxPolicy' | 'metadata' | 'capabilities'>
>

/** Agent records. Methods take `now` from the caller; no rule lives here. */
export class AgentsRepo {
  private readonly byKey
  constructor(private readonly db: Db) {
    this.byKey = db.select().from(agents).where(eq(agents.publicKey, sql.placeholder('key'))).prepare()
  }

  find(publicKey: string): AgentRow | undefined {
    return this.byKey.get({ key: publicKey })
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
  }

  touch(publicKey: string, now: number): void {
    this.db.update(agents).set({ lastActiveAt: now }).where(eq(agents.publicKey, publicKey)).run()
  }

  delete(publicKey: string): void {
    this.db.delete(agents).where(eq(agents.publicKey, publicKey)).run()
  }

  /** Suspends a key, creating a suspended record for an unknown one (SPEC §2.3). */
  suspend(publicKey: string, reason: string | null, now: number): void {
    this.db
      .insert(agents)
      .values({ publicKey, status: 'suspended', suspendedReason: reason, createdAt: now, updatedAt: now, lastActiveAt: now })
      .onConflictDoUpdate({ target: agents.publicKey, set: { status: 'suspended', suspendedReason: reason, updatedAt: now } })
      .run()
  }

  /** Returns false when the key has no record. */
  unsuspend(publicKey: string, now: number): boolean {
    const res = this.db.$client.run(
      `UPDATE agents SET status = 'active', suspended_reason = NULL, updated_at = ? WHERE public_key = ?`,
      [now, publicKey],
    )
    return res.changes > 0
  }

  /** Keys suspended by a change newer than `since` (ms), for a running relay to act on. */
  suspendedSince(since: number): { publicKey: string; updatedAt: number }[] {
    return this.db
      .select({ publicKey: agents.publicKey, updatedAt: agents.updatedAt })
      .from(agents)
      .where(and(eq(agents.status, 'suspended'), gt(agents.updatedAt, since)))
      .all()
  }

  list(opts: { limit: number; after?: string }): AgentRow[] {
    return this.db
      .select()
      .from(agents)
      .where(opts.after ? gt(agents.publicKey, opts.after) : undefined)
      .orderBy(agents.publicKey)
      .limit(opts.limit)
      .all()
  }
}
