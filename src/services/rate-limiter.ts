/**
 * Per-agent rate limits (SPEC §7): an exact sliding log over one minute. Each (kind, agent) keeps the
 * times of its counted requests in the last window, so "N per minute" means exactly N in any 60 s span —
 * no burst of 2N across a bucket edge, as fixed or two-bucket windows allow. Memory is bounded by the
 * traffic actually counted in the last minute (never by the configured limit), and idle agents are
 * dropped by `prune`. A limit of 0 means unlimited and keeps no state at all.
 *
 * Kinds: `send` is shared by POST /v1/messages and WebSocket `send` frames; `poll` is GET /v1/messages.
 */
import { RelayError } from '../errors.ts'

export type RateKind = 'send' | 'poll'

/** What a limited endpoint reports about the caller's window. `headers` is empty when unlimited. */
export interface RateInfo {
  /** Configured limit per window; 0 = unlimited. */
  limit: number
  /** Requests still allowed in the current window (after this one, when it counted). */
  remaining: number
  /** Unix seconds when `remaining` next grows (the oldest counted request leaves the window). */
  resetAt: number
  headers: Record<string, string>
}

export interface RateCheck extends RateInfo {
  allowed: boolean
  /** Whole seconds until a request would be allowed; 0 when allowed. */
  retryAfterS: number
}

/** The SPEC §7 window. */
export const RATE_WINDOW_MS = 60_000
/** How many checks may pass between two sweeps of idle agents. */
const PRUNE_EVERY_CHECKS = 50_000

/** A FIFO of request times with an advancing head; compacted when the dead prefix grows. */
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
  /** Forgets requests that left the window: a request at t counts while now < t + window. */
  trim(now: number, windowMs: number): void {
    while (this.head < this.times.length && this.times[this.head] + windowMs <= now) this.head++
    if (this.head > 64 && this.head * 2 > this.times.length) {
      this.times = this.times.slice(this.head)
      this.head = 0
    }
  }
}

export class RateLimiter {
  private readonly logs: Record<RateKind, Map<string, SlidingLog>> = { send: new Map(), poll: new Map() }
  private checksSincePrune = 0

  constructor(
    private readonly limits: Record<RateKind, number>,
    private readonly windowMs: number = RATE_WINDOW_MS,
  ) {}

  limitOf(kind: RateKind): number {
    return this.limits[kind]
  }

  /**
   * Counts one request of `kind` by `key` if the window has room. A refused request is not counted
   * (SPEC §7). Synchronous, so concurrent requests of one agent can never both take the last slot.
   */
  check(kind: RateKind, key: string, now: number): RateCheck {
    const limit = this.limits[kind]
    if (limit <= 0) return { allowed: true, limit: 0, remaining: 0, resetAt: 0, retryAfterS: 0, headers: {} }
    if (++this.checksSincePrune >= PRUNE_EVERY_CHECKS) this.prune(now)
    const logs = this.logs[kind]
    let log = logs.get(key)
    if (!log) logs.set(key, (log = new SlidingLog()))
    log.trim(now, this.windowMs)
    if (log.size >= limit) {
      const freeAt = log.oldest() + this.windowMs
      const retryAfterS = Math.max(1, Math.ceil((freeAt - now) / 1000))
      return { allowed: false, retryAfterS, ...this.info(limit, 0, freeAt) }
    }
    log.times.push(now)
    return { allowed: true, retryAfterS: 0, ...this.info(limit, limit - log.size, log.oldest() + this.windowMs) }
  }

  /** Like `check` but throws 429 `rate_limit_exceeded` (SPEC §7) when refused. */
  enforce(kind: RateKind, key: string, now: number): RateInfo {
    const result = this.check(kind, key, now)
    if (result.allowed) return result
    throw new RelayError(
      'rate_limit_exceeded',
      `Rate limit of ${result.limit} requests per minute exceeded; retry in ${result.retryAfterS} s`,
      { limit: result.limit, window: '1m', retry_after: result.retryAfterS },
      { ...result.headers, 'Retry-After': String(result.retryAfterS) },
    )
  }

  /** The window as it stands, without counting anything (for responses refused before the check). */
  peek(kind: RateKind, key: string, now: number): RateInfo {
    const limit = this.limits[kind]
    if (limit <= 0) return { limit: 0, remaining: 0, resetAt: 0, headers: {} }
    const log = this.logs[kind].get(key)
    log?.trim(now, this.windowMs)
    if (!log || log.size === 0) return this.info(limit, limit, now)
    return this.info(limit, Math.max(0, limit - log.size), log.oldest() + this.windowMs)
  }

  /** Drops agents with nothing left in their window; returns how many were dropped. */
  prune(now: number): number {
    this.checksSincePrune = 0
    let dropped = 0
    for (const logs of Object.values(this.logs)) {
      for (const [key, log] of logs) {
        if (log.size === 0 || log.newest() + this.windowMs <= now) {
          logs.delete(key)
          dropped++
        }
      }
    }
    return dropped
  }

  /** Number of agents with state, per kind (health and tests). */
  tracked(): Record<RateKind, number> {
    return { send: this.logs.send.size, poll: this.logs.poll.size }
  }

  private info(limit: number, remaining: number, resetAtMs: number): RateInfo {
    const resetAt = Math.ceil(resetAtMs / 1000)
    return {
      limit,
      remaining,
      resetAt,
      headers: {
        'X-RateLimit-Limit': String(limit),
        'X-RateLimit-Remaining': String(remaining),
        'X-RateLimit-Reset': String(resetAt),
      },
    }
  }
}

/** Returns `err` with the rate headers added when it is a RelayError without them. */
export function withRateHeaders(err: unknown, info: RateInfo | null): unknown {
  if (!(err instanceof RelayError) || !info || !Object.keys(info.headers).length) return err
  if (err.headers && 'X-RateLimit-Limit' in err.headers) return err
  const copy = new RelayError(err.code, err.message, err.details, { ...info.headers, ...err.headers })
  copy.stack = err.stack
  return copy
}
