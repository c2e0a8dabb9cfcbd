import type { AgentChange, AgentProfileFields, AgentRecord } from '../../services/models/records.ts'
import type { AgentStore } from '../../services/ports.ts'
import { exec, one, rows, type Db } from './db.ts'
import { PROFILE_COLUMNS } from '../profile-columns.ts'

/** Rows kept in memory; every signed request reads its caller's record. */
const CACHE_MAX = 20_000

/**
 * A small LRU of committed agent records. Only reads outside a transaction fill it; writes drop the
 * entry when they run and again after their commit, so a rolled-back write or a read racing a write
 * never leaves a copy behind. Changes made by other instances arrive through `changedSince` (the relay
 * invalidates what it reports); `touch` on another instance does not change `updated_at`, so entries
 * are also dropped after `maxAgeMs`.
 */
export class PgAgentCache {
  private readonly rows = new Map<string, { row: AgentRecord; at: number }>()
  /** Per key, the number of the latest drop: a read that started before a drop of its key does not fill the cache. */
  private readonly drops = new Map<string, number>()
  private dropCount = 0
  /** Grows when `drops` is cleared (it is bounded): then every read under way is refused too. */
  private epoch = 0
  constructor(private readonly maxAgeMs = 5_000) {}

  /** Taken before a read, handed to `set` with what was read. */
  mark(key: string): { epoch: number; drop: number } {
    return { epoch: this.epoch, drop: this.drops.get(key) ?? 0 }
  }
  get(key: string): AgentRecord | undefined {
    const hit = this.rows.get(key)
    if (!hit) return undefined
    this.rows.delete(key)
    if (performance.now() - hit.at > this.maxAgeMs) return undefined
    this.rows.set(key, hit)
    return hit.row
  }
  set(key: string, row: AgentRecord, mark: { epoch: number; drop: number }): void {
    if (mark.epoch !== this.epoch || (this.drops.get(key) ?? 0) !== mark.drop) return
    this.rows.set(key, { row, at: performance.now() })
    if (this.rows.size > CACHE_MAX) this.rows.delete(this.rows.keys().next().value as string)
  }
  drop(key: string): void {
    this.rows.delete(key)
    this.drops.set(key, ++this.dropCount)
    if (this.drops.size > CACHE_MAX) {
      this.drops.clear()
      this.epoch++
    }
  }
}

export const AGENT_COLUMNS = `public_key AS "publicKey", display_name AS "displayName", status, suspended_reason AS "suspendedReason",
  visibility, inbox_policy AS "inboxPolicy", metadata, capabilities, created_at::float8 AS "createdAt",
  updated_at::float8 AS "updatedAt", last_active_at::float8 AS "lastActiveAt"`


/**
 * Words of a text the way SQLite's FTS5 unicode61 tokenizer (remove_diacritics 2) sees them: runs of
 * letters and digits, lower case, without diacritics.
 */
export function searchWords(text: string): string[] {
  return text
    .normalize('NFD')
    .replace(/\p{M}/gu, '')
    .toLowerCase()
    .split(/[^\p{L}\p{N}\p{Co}]+/u)
    .filter((w) => w.length > 0)
}

/**
 * The tags of a capabilities document as SQLite's trigger reads them: every string in the `tags` array
 * of each capability, lower-cased (ASCII letters, as SQLite's lower()), each once, in order.
 */
export function profileTags(capabilities: string): string[] {
  const tags = new Set<string>()
  try {
    const caps = JSON.parse(capabilities) as unknown
    if (Array.isArray(caps)) {
      for (const c of caps) {
        const list = c && typeof c === 'object' ? (c as { tags?: unknown }).tags : undefined
        if (!Array.isArray(list)) continue
        for (const t of list) if (typeof t === 'string') tags.add(t.replace(/[A-Z]/g, (ch) => ch.toLowerCase()))
      }
    }
  } catch {
    // not JSON: no tags
  }
  return [...tags].sort()
}

/** The searchable words of a profile: display name, capability names and descriptions. */
export function profileWords(displayName: string | null, capabilities: string): string[] {
  const parts: string[] = [displayName ?? '']
  try {
    const caps = JSON.parse(capabilities) as unknown
    if (Array.isArray(caps)) {
      for (const c of caps) {
        if (c && typeof c === 'object') {
          const { name, description } = c as { name?: unknown; description?: unknown }
          if (typeof name === 'string') parts.push(name)
          if (typeof description === 'string') parts.push(description)
        }
      }
    }
  } catch {
    // not JSON: no capability words
  }
  return [...new Set(parts.flatMap(searchWords))]
}

/**
 * Agent records on the pool or on one transaction. `inTransaction` stores never fill the cache; their
 * writes drop the entry at once and again after the commit (`afterCommit`).
 */
export class PgAgentStore implements AgentStore {
  constructor(
    private readonly db: Db,
    private readonly cache: PgAgentCache,
    private readonly inTransaction: boolean,
    private readonly afterCommit: (step: () => void) => void = () => {},
  ) {}

  async count(): Promise<number> {
    return (await one<{ n: number }>(this.db, 'SELECT count(*)::int AS n FROM agents'))?.n ?? 0
  }

  async find(publicKey: string): Promise<AgentRecord | null> {
    if (!this.inTransaction) {
      const hit = this.cache.get(publicKey)
      if (hit) return hit
    }
    const mark = this.cache.mark(publicKey)
    const row = await one<AgentRecord>(this.db, `SELECT ${AGENT_COLUMNS} FROM agents WHERE public_key = $1`, [publicKey])
    if (row && !this.inTransaction) this.cache.set(publicKey, row, mark)
    return row
  }

  async create(publicKey: string, now: number): Promise<AgentRecord> {
    const inserted = await one<AgentRecord>(
      this.db,
      `INSERT INTO agents (public_key, created_at, updated_at, last_active_at) VALUES ($1, $2, $2, $2)
       ON CONFLICT (public_key) DO NOTHING RETURNING ${AGENT_COLUMNS}`,
      [publicKey, now],
    )
    if (inserted) return inserted
    return (await this.find(publicKey)) as AgentRecord
  }

  /**
   * Runs in a transaction (TX_WRITES): one relay-wide advisory lock serialises capped creations on
   * every instance, so the count each one reads includes every insert committed before it.
   */
  async createCapped(publicKey: string, now: number, maxAgents: number): Promise<AgentRecord | null> {
    const existing = await this.find(publicKey)
    if (existing) return existing
    await exec(this.db, 'SELECT pg_advisory_xact_lock(hashtext($1))', ['relay.agents.cap'])
    const inserted = await one<AgentRecord>(
      this.db,
      `INSERT INTO agents (public_key, created_at, updated_at, last_active_at) SELECT $1, $2, $2, $2
       WHERE (SELECT count(*) FROM agents) < $3
       ON CONFLICT (public_key) DO NOTHING RETURNING ${AGENT_COLUMNS}`,
      [publicKey, now, maxAgents],
    )
    return inserted ?? (await this.find(publicKey))
  }

  async updateProfile(publicKey: string, fields: AgentProfileFields, now: number): Promise<void> {
    const names = (Object.keys(fields) as (keyof AgentProfileFields)[]).filter((k) => fields[k] !== undefined).sort()
    const sets = names.map((n, i) => `${PROFILE_COLUMNS[n]} = $${i + 3}`)
    const updated = await one<{ displayName: string | null; capabilities: string; listed: boolean; lastActiveAt: number }>(
      this.db,
      `UPDATE agents SET ${[...sets, 'updated_at = $2'].join(', ')} WHERE public_key = $1
       RETURNING display_name AS "displayName", capabilities, visibility = 'public' AND status = 'active' AS listed,
         last_active_at::float8 AS "lastActiveAt"`,
      [publicKey, now, ...names.map((n) => fields[n])],
    )
    if (updated && fields.capabilities !== undefined) {
      // agent_tags rows in tag order: their triggers update tag_counts rows in one order in every unit
      await exec(this.db, 'DELETE FROM agent_tags WHERE public_key = $1', [publicKey])
      const tags = profileTags(updated.capabilities)
      if (tags.length) {
        await exec(
          this.db,
          `INSERT INTO agent_tags (public_key, tag, listed, last_active_at) SELECT $1, t, $3, $4 FROM unnest($2::text[]) AS t ORDER BY t ON CONFLICT DO NOTHING`,
          [publicKey, tags, updated.listed, updated.lastActiveAt],
        )
      }
    }
    if (updated && (fields.displayName !== undefined || fields.capabilities !== undefined)) {
      await exec(this.db, 'DELETE FROM agent_words WHERE public_key = $1', [publicKey])
      const words = profileWords(updated.displayName, updated.capabilities)
      if (words.length) {
        await exec(this.db, 'INSERT INTO agent_words (public_key, word) SELECT $1, unnest($2::text[]) ON CONFLICT DO NOTHING', [publicKey, words])
      }
    }
    this.drop(publicKey)
  }

  async touch(publicKey: string, now: number): Promise<void> {
    await exec(this.db, 'UPDATE agents SET last_active_at = $1 WHERE public_key = $2 AND last_active_at IS DISTINCT FROM $1', [now, publicKey])
    if (this.inTransaction) this.drop(publicKey)
    else {
      const cached = this.cache.get(publicKey)
      if (cached) cached.lastActiveAt = Math.max(cached.lastActiveAt, now)
    }
  }

  async delete(publicKey: string): Promise<void> {
    await exec(this.db, 'DELETE FROM agents WHERE public_key = $1', [publicKey])
    this.drop(publicKey)
  }

  async suspend(publicKey: string, reason: string | null, now: number): Promise<void> {
    await exec(
      this.db,
      `INSERT INTO agents (public_key, status, suspended_reason, created_at, updated_at, last_active_at)
       VALUES ($1, 'suspended', $2, $3, $3, $3)
       ON CONFLICT (public_key) DO UPDATE SET status = 'suspended', suspended_reason = excluded.suspended_reason, updated_at = excluded.updated_at`,
      [publicKey, reason, now],
    )
    this.drop(publicKey)
  }

  async unsuspend(publicKey: string, now: number): Promise<boolean> {
    const changed = (await exec(this.db, `UPDATE agents SET status = 'active', suspended_reason = NULL, updated_at = $1 WHERE public_key = $2`, [now, publicKey])) > 0
    this.drop(publicKey)
    return changed
  }

  async changedSince(since: number): Promise<AgentChange[]> {
    return rows<AgentChange>(
      this.db,
      'SELECT public_key AS "publicKey", status, updated_at::float8 AS "updatedAt" FROM agents WHERE updated_at > $1 ORDER BY updated_at',
      [since],
    )
  }

  invalidate(publicKey: string): void {
    this.cache.drop(publicKey)
  }

  private drop(publicKey: string): void {
    this.cache.drop(publicKey)
    this.afterCommit(() => this.cache.drop(publicKey))
  }
}
