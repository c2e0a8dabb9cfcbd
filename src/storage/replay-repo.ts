import type { Db } from './db.ts'

/**
 * The persistent replay cache (SPEC §1.2 step 4): an accepted signature is stored until `expiresAt`,
 * so a replay is refused even after a restart.
 */
export class ReplayRepo {
  private readonly insert
  private readonly exists
  private readonly prune
  constructor(db: Db) {
    const client = db.$client
    this.insert = client.prepare<unknown, [string, string, number]>(
      'INSERT OR IGNORE INTO replay_cache (signature, public_key, expires_at) VALUES (?, ?, ?)',
    )
    this.exists = client.prepare<{ one: number }, [string]>('SELECT 1 AS one FROM replay_cache WHERE signature = ?')
    this.prune = client.prepare<unknown, [number, number]>(
      'DELETE FROM replay_cache WHERE rowid IN (SELECT rowid FROM replay_cache WHERE expires_at <= ? LIMIT ?)',
    )
  }

  /** True when the signature was accepted before (and is still kept). */
  has(signature: string): boolean {
    return this.exists.get(signature) !== null
  }

  /** Records the pair; false when it was already there (a replay). Atomic: one statement. */
  remember(publicKey: string, signature: string, expiresAt: number): boolean {
    return this.insert.run(signature, publicKey, expiresAt).changes === 1
  }

  /** Deletes up to `limit` expired entries; returns how many went. */
  pruneExpired(now: number, limit: number): number {
    return this.prune.run(now, limit).changes
  }
}
