/**
 * Requests answered per minute over the last hour, for operators (GET /v1/admin/traffic, the console's
 * chart): a ring of 60 one-minute buckets, each counting every answer and those with a 4xx or a 5xx
 * status. Fixed memory whatever the load; kept in memory only, so a restart starts empty.
 */
import { iso } from './clock.ts'

const MINUTE_MS = 60_000

export interface TrafficMinute {
  /** Start of the minute, RFC 3339 UTC. */
  minute: string
  requests: number
  client_errors: number
  server_errors: number
}

interface Bucket {
  /** Minute number since the epoch; a bucket whose minute is not the one asked for counts as empty. */
  minute: number
  requests: number
  clientErrors: number
  serverErrors: number
}

export class TrafficLog {
  private readonly buckets: Bucket[]

  constructor(readonly minutes = 60) {
    this.buckets = Array.from({ length: minutes }, () => ({ minute: -1, requests: 0, clientErrors: 0, serverErrors: 0 }))
  }

  /** Counts one answer with this status at `nowMs`. */
  record(status: number, nowMs: number): void {
    const minute = Math.floor(nowMs / MINUTE_MS)
    const b = this.buckets[minute % this.minutes]
    if (b.minute !== minute) {
      b.minute = minute
      b.requests = b.clientErrors = b.serverErrors = 0
    }
    b.requests++
    if (status >= 500) b.serverErrors++
    else if (status >= 400) b.clientErrors++
  }

  /** The last `minutes` minutes up to and including the current one, oldest first (empty minutes as zeros). */
  series(nowMs: number): TrafficMinute[] {
    const current = Math.floor(nowMs / MINUTE_MS)
    const out: TrafficMinute[] = []
    for (let m = current - this.minutes + 1; m <= current; m++) {
      const b = this.buckets[((m % this.minutes) + this.minutes) % this.minutes]
      const live = b.minute === m
      out.push({
        minute: iso(m * MINUTE_MS),
        requests: live ? b.requests : 0,
        client_errors: live ? b.clientErrors : 0,
        server_errors: live ? b.serverErrors : 0,
      })
    }
    return out
  }
}
