import type { Database, Statement } from 'bun:sqlite'
import type { ReplayReservation, ReplayStore } from '../../services/ports.ts'

/**
 * The replay guard of one relay on SQLite. Lookups are in memory (loaded at start-up, so a signature
 * accepted before a restart or a kill -9 is still refused after it); each accepted signature is
 * appended to replay_log through the unit of work, so it usually shares its commit with the writes of
 * the request itself. One process owns the database, so memory is the whole truth.
 */
export class SqliteReplayStore implements ReplayStore {
  /** signature id → expiry (ms), in insertion order (≈ expiry order). */
  private readonly seen = new Map<string, number>()
  private readonly appendStmt: Statement<unknown, [string, number]>
  private readonly headStmt: Statement<{ id: number; expires_at: number }, [number]>
  private readonly pruneStmt: Statement<unknown, [number]>

  constructor(
    writer: Database,
    reader: Database,
    private readonly write: (op: () => void) => Promise<void>,
    now: number,
  ) {
    this.appendStmt = writer.prepare('INSERT INTO replay_log (signature, expires_at) VALUES (?, ?)')
    this.headStmt = writer.prepare('SELECT id, expires_at FROM replay_log ORDER BY id LIMIT ?')
    this.pruneStmt = writer.prepare('DELETE FROM replay_log WHERE id <= ?')
    const active = reader.query<{ signature: string; expires_at: number }, [number]>(
      'SELECT signature, expires_at FROM replay_log WHERE expires_at > ? ORDER BY id',
    )
    for (const row of active.all(now)) this.seen.set(row.signature, row.expires_at)
  }

  async reserve(signatureId: string, expiresAt: number): Promise<ReplayReservation | null> {
    if (this.seen.has(signatureId)) return null
    this.seen.set(signatureId, expiresAt)
    const durable = this.write(() => this.appendStmt.run(signatureId, expiresAt)).catch((err) => {
      this.seen.delete(signatureId) // not durable: let an honest retry through
      throw err
    })
    return { durable }
  }

  /**
   * Forgets expired entries in memory and in the log. Entries are appended in time order, so the
   * expired ones are a prefix of the log: no index on expires_at is needed.
   */
  async prune(now: number, limit: number): Promise<number> {
    for (const [id, expiresAt] of this.seen) {
      if (expiresAt > now) break
      this.seen.delete(id)
    }
    let removed = 0
    await this.write(() => {
      let last = -1
      for (const row of this.headStmt.all(limit)) {
        if (row.expires_at > now) break
        last = row.id
      }
      if (last >= 0) removed = this.pruneStmt.run(last).changes
    })
    return removed
  }
}
