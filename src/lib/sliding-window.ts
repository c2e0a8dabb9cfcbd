/**
 * Exact sliding-window counters in memory: each bucket keeps the times of its counted events in the
 * last window, so "N per minute" means exactly N in any 60 s span — no burst of 2N across a bucket
 * edge, as fixed or two-bucket windows allow. Memory is bounded by the traffic actually counted in the
 * last window (never by the configured limit); `prune` drops idle buckets. The store of a single relay,
 * and of limits that stay per instance in a cluster.
 */

/** A FIFO of event times with an advancing head; compacted when the dead prefix grows. */
class SlidingLog {
  times: number[] = []
  head = 0
  get size(): number {
    return this.times.length - this.head
  }
  oldest(): number {
    return this.times[this.head]
  }
  newest(): number {
    return this.times[this.times.length - 1]
  }
  /** Forgets events that left the window: an event at t counts while now < t + window. */
  trim(now: number, windowMs: number): void {
    while (this.head < this.times.length && this.times[this.head] + windowMs <= now) this.head++
    if (this.head > 64 && this.head * 2 > this.times.length) {
      this.times = this.times.slice(this.head)
      this.head = 0
    }
  }
}

/** In-memory sliding-window counters; structurally a RateStore (services/ports.ts). */
export class SlidingWindowCounters {
  private readonly logs = new Map<string, SlidingLog>()

  /** `hit`, answered synchronously (nothing to wait for in memory). */
  hitNow(bucket: string, limit: number, windowMs: number, now: number, n = 1): { allowed: boolean; count: number; oldestAt: number } {
    let log = this.logs.get(bucket)
    if (!log) this.logs.set(bucket, (log = new SlidingLog()))
    log.trim(now, windowMs)
    if (log.size + n > limit) return { allowed: false, count: log.size, oldestAt: log.size ? log.oldest() : now }
    for (let i = 0; i < n; i++) log.times.push(now)
    return { allowed: true, count: log.size, oldestAt: log.size ? log.oldest() : now }
  }

  peekNow(bucket: string, windowMs: number, now: number): { count: number; oldestAt: number } {
    const log = this.logs.get(bucket)
    log?.trim(now, windowMs)
    if (!log || log.size === 0) return { count: 0, oldestAt: now }
    return { count: log.size, oldestAt: log.oldest() }
  }

  pruneNow(windowMs: number, now: number): number {
    let dropped = 0
    for (const [bucket, log] of this.logs) {
      if (log.size === 0 || log.newest() + windowMs <= now) {
        this.logs.delete(bucket)
        dropped++
      }
    }
    return dropped
  }

  async hit(bucket: string, limit: number, windowMs: number, now: number, n = 1) {
    return this.hitNow(bucket, limit, windowMs, now, n)
  }

  async peek(bucket: string, windowMs: number, now: number) {
    return this.peekNow(bucket, windowMs, now)
  }

  async prune(windowMs: number, now: number): Promise<number> {
    return this.pruneNow(windowMs, now)
  }

  /** Buckets with state whose name starts with `prefix` (tests, health). */
  tracked(prefix = ''): number {
    let n = 0
    for (const key of this.logs.keys()) if (key.startsWith(prefix)) n++
    return n
  }
}
