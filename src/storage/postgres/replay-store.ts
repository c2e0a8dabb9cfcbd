import type { ReplayReservation, ReplayStore } from '../../services/ports.ts'
import { exec, type Db } from './db.ts'

/**
 * The replay guard shared by every instance: a signature is recorded with INSERT … ON CONFLICT DO
 * NOTHING, so of two requests carrying it — on this instance or any other — exactly one inserts it and
 * the other is a replay. The entry is durable when `reserve` resolves.
 */
export class PgReplayStore implements ReplayStore {
  constructor(private readonly db: Db) {}

  async reserve(signatureId: string, expiresAt: number): Promise<ReplayReservation | null> {
    const inserted = await exec(this.db, 'INSERT INTO replay_log (signature, expires_at) VALUES ($1, $2) ON CONFLICT (signature) DO NOTHING', [signatureId, expiresAt])
    return inserted > 0 ? { durable: Promise.resolve() } : null
  }

  async prune(now: number, limit: number): Promise<number> {
    return exec(
      this.db,
      'DELETE FROM replay_log WHERE id IN (SELECT id FROM replay_log WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)',
      [now, limit],
    )
  }
}
