import type { Database } from 'bun:sqlite'
import type { Db } from './db.ts'

/** The append-only log behind the replay cache (see `replayLog` in schema.ts). */
export class ReplayRepo {
  private readonly client: Database
  private readonly insert
  constructor(db: Db) {
    this.client = db.$client
    this.insert = this.client.prepare<unknown, [string, number]>('INSERT INTO replay_log (signature, expires_at) VALUES (?, ?)')
  }

  append(signatureId: string, expiresAt: number): void {
    this.insert.run(signatureId, expiresAt)
  }

  /** Entries still in force, oldest first. */
  loadActive(now: number): { signature: string; expires_at: number }[] {
    return this.client
      .query<{ signature: string; expires_at: number }, [number]>('SELECT signature, expires_at FROM replay_log WHERE expires_at > ? ORDER BY id')
      .all(now)
  }

  /**
   * Deletes expired entries from the front of the log, at most `limit` per call. Entries are appended
   * in time order, so the expired ones are a prefix: no index on expires_at is needed.
   */
  pruneExpired(now: number, limit: number): number {
    const head = this.client
      .query<{ id: number; expires_at: number }, [number]>('SELECT id, expires_at FROM replay_log ORDER BY id LIMIT ?')
      .all(limit)
    let last = -1
    for (const row of head) {
      if (row.expires_at > now) break
      last = row.id
    }
    if (last < 0) return 0
    return this.client.run('DELETE FROM replay_log WHERE id <= ?', [last]).changes
  }
}
