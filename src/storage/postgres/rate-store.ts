import type { RateStore } from '../../services/ports.ts'
import { exec, one, type Db } from './db.ts'

/**
 * Exact sliding-window counters shared by every instance: a bucket's window is its events in
 * rate_events. A hit takes a transaction-scoped advisory lock on the bucket, counts the window and
 * inserts the event, so concurrent hits on any instance are counted one after the other. An event at t
 * counts while now < t + window (as the in-memory counters).
 */
export class PgRateStore implements RateStore {
  constructor(private readonly sql: Db) {}

  async hit(bucket: string, limit: number, windowMs: number, now: number): Promise<{ allowed: boolean; count: number; oldestAt: number }> {
    return this.sql.begin(async (tx) => {
      await exec(tx, 'SELECT pg_advisory_xact_lock(hashtext($1))', [bucket])
      const window = await one<{ n: number; oldest: number | null }>(
        tx,
        'SELECT count(*)::int AS n, min(at)::float8 AS oldest FROM rate_events WHERE bucket = $1 AND at > $2',
        [bucket, now - windowMs],
      )
      const count = window?.n ?? 0
      if (count >= limit) return { allowed: false, count, oldestAt: window?.oldest ?? now }
      await exec(tx, 'INSERT INTO rate_events (bucket, at) VALUES ($1, $2)', [bucket, now])
      return { allowed: true, count: count + 1, oldestAt: Math.min(window?.oldest ?? now, now) }
    })
  }

  async peek(bucket: string, windowMs: number, now: number): Promise<{ count: number; oldestAt: number }> {
    const window = await one<{ n: number; oldest: number | null }>(
      this.sql,
      'SELECT count(*)::int AS n, min(at)::float8 AS oldest FROM rate_events WHERE bucket = $1 AND at > $2',
      [bucket, now - windowMs],
    )
    const count = window?.n ?? 0
    return count === 0 ? { count: 0, oldestAt: now } : { count, oldestAt: window?.oldest ?? now }
  }

  async prune(windowMs: number, now: number): Promise<number> {
    const row = await one<{ n: number }>(
      this.sql,
      `WITH gone AS (DELETE FROM rate_events WHERE at <= $1 RETURNING bucket)
       SELECT count(DISTINCT bucket)::int AS n FROM gone
       WHERE NOT EXISTS (SELECT 1 FROM rate_events r WHERE r.bucket = gone.bucket AND r.at > $1)`,
      [now - windowMs],
    )
    return row?.n ?? 0
  }
}
