import type { ReplayReservation, ReplayStore } from '../../services/ports.ts'
import { exec, rows, type Db } from './db.ts'

interface Pending {
  signatureId: string
  expiresAt: number
  resolve: (reserved: boolean) => void
  reject: (err: unknown) => void
}

/** Signatures recorded by one statement at most. */
const MAX_BATCH = 500

/**
 * The replay guard shared by every instance: a signature is recorded with INSERT … ON CONFLICT DO
 * NOTHING, so of two requests carrying it — on this instance or any other — exactly one inserts it and
 * the other is a replay. The entry is durable when `reserve` resolves.
 *
 * The reservations asked for during one turn of the event loop go in one statement (one round trip, one
 * commit): under load each request no longer pays a statement of its own. Within a statement the first
 * request carrying a signature gets it; a later one in the same statement is a replay.
 */
export class PgReplayStore implements ReplayStore {
  private queue: Pending[] = []
  private scheduled = false

  constructor(private readonly db: Db) {}

  reserve(signatureId: string, expiresAt: number): Promise<ReplayReservation | null> {
    return new Promise<boolean>((resolve, reject) => {
      this.queue.push({ signatureId, expiresAt, resolve, reject })
      if (this.scheduled) return
      this.scheduled = true
      setImmediate(() => this.flush())
    }).then((reserved) => (reserved ? { durable: Promise.resolve() } : null))
  }

  private flush(): void {
    this.scheduled = false
    while (this.queue.length > 0) void this.record(this.queue.splice(0, MAX_BATCH))
  }

  private async record(batch: Pending[]): Promise<void> {
    try {
      const inserted =
        batch.length === 1
          ? (await exec(this.db, 'INSERT INTO replay_log (signature, expires_at) VALUES ($1, $2) ON CONFLICT (signature) DO NOTHING', [batch[0].signatureId, batch[0].expiresAt])) > 0
            ? new Set([batch[0].signatureId])
            : new Set<string>()
          : new Set(
              (
                await rows<{ signature: string }>(
                  this.db,
                  `INSERT INTO replay_log (signature, expires_at) SELECT * FROM unnest($1::text[], $2::bigint[])
                   ON CONFLICT (signature) DO NOTHING RETURNING signature`,
                  // in one order on every instance: two statements never wait on each other's rows
                  sortedColumns(batch),
                )
              ).map((r) => r.signature),
            )
      for (const p of batch) {
        // the first of a batch carrying the signature has it; the others are replays
        p.resolve(inserted.delete(p.signatureId))
      }
    } catch (err) {
      for (const p of batch) p.reject(err)
    }
  }

  /** Deletes in statements of `limit` rows (each a short transaction) until none expired is left. */
  async prune(now: number, limit: number): Promise<number> {
    let removed = 0
    for (;;) {
      const batch = await exec(
        this.db,
        'DELETE FROM replay_log WHERE id IN (SELECT id FROM replay_log WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)',
        [now, limit],
      )
      removed += batch
      if (batch < limit) return removed
    }
  }
}

function sortedColumns(batch: Pending[]): [string[], number[]] {
  const sorted = [...batch].sort((a, b) => (a.signatureId < b.signatureId ? -1 : a.signatureId > b.signatureId ? 1 : 0))
  return [sorted.map((p) => p.signatureId), sorted.map((p) => p.expiresAt)]
}
