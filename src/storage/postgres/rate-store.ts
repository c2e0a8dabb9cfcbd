import type { RateStore } from '../../services/ports.ts'
import { escapeText, one, type Db } from './db.ts'

/** A string as an SQL literal (E'…': its meaning does not depend on standard_conforming_strings). */
function literal(s: string): string {
  return `E'${escapeText(s).replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`
}

/** A number as an SQL literal. */
function num(n: number): string {
  if (!Number.isFinite(n)) throw new TypeError(`not a finite number: ${n}`)
  return String(n)
}

/**
 * Exact sliding-window counters shared by every instance: a bucket's window is its events in
 * rate_events. A hit takes a transaction-scoped advisory lock on the bucket, counts the window and
 * inserts the events, so concurrent hits on any instance are counted one after the other. An event at t
 * counts while now < t + window (as the in-memory counters).
 *
 * A hit is one round trip: two statements in one simple query, which PostgreSQL runs as one implicit
 * transaction (the lock is held to its end), each statement with a snapshot of its own — the count,
 * taken once the lock is held, sees every event committed by the hits before it. The simple protocol
 * takes no parameters, so the values are written as literals.
 */
export class PgRateStore implements RateStore {
  constructor(private readonly sql: Db) {}

  async hit(bucket: string, limit: number, windowMs: number, now: number, n = 1): Promise<{ allowed: boolean; count: number; oldestAt: number }> {
    const b = literal(bucket)
    const result = (await this.sql.unsafe(
      `SELECT pg_advisory_xact_lock(hashtext(${b}));
       WITH w AS (SELECT count(*)::bigint AS n, min(at)::float8 AS oldest FROM rate_events WHERE bucket = ${b} AND at > ${num(now - windowMs)}),
       ins AS (INSERT INTO rate_events (bucket, at) SELECT ${b}, ${num(now)} FROM w, generate_series(1, ${num(n)}) WHERE w.n + ${num(n)} <= ${num(limit)} RETURNING 1)
       SELECT w.n::float8 AS n, w.oldest FROM w`,
    )) as unknown as { n: number; oldest: number | null }[][]
    const window = result[1]?.[0]
    const before = window?.n ?? 0
    const oldest = window?.oldest ?? null
    if (before + n > limit) return { allowed: false, count: before, oldestAt: oldest ?? now }
    return { allowed: true, count: before + n, oldestAt: Math.min(oldest ?? now, now) }
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
