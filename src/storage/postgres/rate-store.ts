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

interface Hit {
  bucket: string
  limit: number
  windowMs: number
  now: number
  n: number
  resolve: (value: { allowed: boolean; count: number; oldestAt: number }) => void
  reject: (err: unknown) => void
}

/** Buckets one statement counts at most. */
const MAX_BATCH = 200
/** Statements under way at once. */
const MAX_IN_FLIGHT = 4

/**
 * Exact sliding-window counters shared by every instance: a bucket's window is its events in
 * rate_events. A hit takes a transaction-scoped advisory lock on the bucket, counts the window and
 * inserts the events, so concurrent hits on any instance are counted one after the other. An event at t
 * counts while now < t + window (as the in-memory counters).
 *
 * The hits asked for during one turn of the event loop go together, one round trip for all: two
 * statements in one simple query, which PostgreSQL runs as one implicit transaction (the locks are held
 * to its end), each statement with a snapshot of its own — the counts, taken once every lock is held,
 * see every event committed by the hits before them. The locks are taken in one order (by hash) on
 * every instance, so two such queries never wait on each other in a circle. A batch holds one hit per
 * bucket; another hit of the same bucket waits for the next one. The simple protocol takes no
 * parameters, so the values are written as literals.
 */
export class PgRateStore implements RateStore {
  private queue: Hit[] = []
  private scheduled = false
  private inFlight = 0
  /** Buckets with a hit under way: their next hit waits for it. */
  private readonly busy = new Set<string>()

  constructor(private readonly sql: Db) {}

  hit(bucket: string, limit: number, windowMs: number, now: number, n = 1): Promise<{ allowed: boolean; count: number; oldestAt: number }> {
    return new Promise((resolve, reject) => {
      this.queue.push({ bucket, limit, windowMs, now, n, resolve, reject })
      this.schedule()
    })
  }

  private schedule(): void {
    if (this.scheduled || this.inFlight >= MAX_IN_FLIGHT || this.queue.length === 0) return
    this.scheduled = true
    setImmediate(() => this.pump())
  }

  private pump(): void {
    this.scheduled = false
    while (this.inFlight < MAX_IN_FLIGHT) {
      const batch: Hit[] = []
      const rest: Hit[] = []
      for (const h of this.queue) {
        if (batch.length < MAX_BATCH && !this.busy.has(h.bucket)) {
          this.busy.add(h.bucket)
          batch.push(h)
        } else rest.push(h)
      }
      this.queue = rest
      if (batch.length === 0) return
      this.inFlight++
      void this.count(batch).finally(() => {
        for (const h of batch) this.busy.delete(h.bucket)
        this.inFlight--
        this.schedule()
      })
    }
  }

  private async count(batch: Hit[]): Promise<void> {
    try {
      const buckets = batch.map((h) => literal(h.bucket)).join(', ')
      const requests = batch
        .map((h, i) => `(${i}, ${literal(h.bucket)}, ${num(h.n)}::bigint, ${num(h.limit)}::bigint, ${num(h.now)}::bigint, ${num(h.now - h.windowMs)}::bigint)`)
        .join(', ')
      const result = (await this.sql.unsafe(
        `SELECT pg_advisory_xact_lock(k) FROM (SELECT DISTINCT hashtext(b) AS k FROM unnest(ARRAY[${buckets}]::text[]) AS b ORDER BY 1) locks;
         WITH req (i, bucket, n, lim, at, since) AS (VALUES ${requests}),
         w AS (SELECT req.*, x.cnt, x.oldest FROM req CROSS JOIN LATERAL
           (SELECT count(*)::bigint AS cnt, min(e.at)::float8 AS oldest FROM rate_events e WHERE e.bucket = req.bucket AND e.at > req.since) x),
         ins AS (INSERT INTO rate_events (bucket, at) SELECT w.bucket, w.at FROM w, generate_series(1, w.n) WHERE w.cnt + w.n <= w.lim RETURNING 1)
         SELECT w.i, w.cnt::float8 AS cnt, w.oldest FROM w`,
      )) as unknown as { i: number; cnt: number; oldest: number | null }[][]
      const windows = result[1] ?? []
      const byIndex = new Map(windows.map((w) => [Number(w.i), w]))
      batch.forEach((h, i) => {
        const window = byIndex.get(i)
        const before = window?.cnt ?? 0
        const oldest = window?.oldest ?? null
        if (before + h.n > h.limit) h.resolve({ allowed: false, count: before, oldestAt: oldest ?? h.now })
        else h.resolve({ allowed: true, count: before + h.n, oldestAt: Math.min(oldest ?? h.now, h.now) })
      })
    } catch (err) {
      for (const h of batch) h.reject(err)
    }
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
