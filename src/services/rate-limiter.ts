/**
 * Per-agent rate limits (docs/protocol.md §7): an exact sliding log over one minute. Each (kind, agent) keeps the
 * times of its counted requests in the last window, so "N per minute" means exactly N in any 60 s span —
 * no burst of 2N across a bucket edge, as fixed or two-bucket windows allow. Memory is bounded by the
 * traffic actually counted in the last minute (never by the configured limit), and idle agents are
 * dropped by `prune`. A limit of 0 means unlimited and keeps no state at all.
 *
 * Kinds: `send` is shared by POST /v1/messages and WebSocket `send` frames; `poll` counts the messages
 * an agent receives through GET /v1/messages (one event per message returned, as MRP counts its receive
 * limit, so polling an empty inbox costs nothing there); `pollRequest` counts the poll requests
 * themselves against a generous cap that only a loop reaches; `request` is every other authenticated
 * HTTP request (the general limit, see http/pipeline.ts).
 */
import { RelayError } from '../errors.ts'
import { SlidingWindowCounters } from '../lib/sliding-window.ts'
import type { RateStore } from './ports.ts'

export type RateKind = 'send' | 'poll' | 'pollRequest' | 'request'

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

/** The docs/protocol.md §7 window. */
export const RATE_WINDOW_MS = 60_000
/** How many checks may pass between two sweeps of idle agents. */
const PRUNE_EVERY_CHECKS = 50_000

export class RateLimiter {
  private checksSincePrune = 0
  /** The general limit is counted here, in this process, whatever storage is shared. */
  private readonly local = new SlidingWindowCounters()

  constructor(
    private readonly limits: Record<'send' | 'poll', number> & { pollRequest?: number; request?: number },
    /** Where send and poll windows are counted: shared by every instance of a cluster. */
    private readonly shared: RateStore = new SlidingWindowCounters(),
    private readonly windowMs: number = RATE_WINDOW_MS,
  ) {}

  limitOf(kind: RateKind): number {
    return this.limits[kind] ?? 0
  }

  private storeOf(kind: RateKind): RateStore {
    return kind === 'request' ? this.local : this.shared
  }

  /**
   * Counts one request of `kind` by `key` if the window has room. A refused request is not counted
   * (docs/protocol.md §7); the store decides atomically, so concurrent requests of one agent can never
   * both take the last slot.
   */
  async check(kind: RateKind, key: string, now: number): Promise<RateCheck> {
    const limit = this.limitOf(kind)
    if (limit <= 0) return { allowed: true, limit: 0, remaining: 0, resetAt: 0, retryAfterS: 0, headers: {} }
    if (++this.checksSincePrune >= PRUNE_EVERY_CHECKS) void this.prune(now)
    const hit = await this.storeOf(kind).hit(`${kind}:${key}`, limit, this.windowMs, now)
    const freeAt = hit.oldestAt + this.windowMs
    if (!hit.allowed) {
      const retryAfterS = Math.max(1, Math.ceil((freeAt - now) / 1000))
      return { allowed: false, retryAfterS, ...this.info(limit, 0, freeAt) }
    }
    return { allowed: true, retryAfterS: 0, ...this.info(limit, limit - hit.count, freeAt) }
  }

  /** Like `check` but throws 429 `rate_limit_exceeded` (docs/protocol.md §7) when refused. */
  async enforce(kind: RateKind, key: string, now: number): Promise<RateInfo> {
    const result = await this.check(kind, key, now)
    if (result.allowed) return result
    throw this.refusal(result, 'requests')
  }

  /**
   * Room left in a window counted per item (received messages): how many items may still be taken,
   * or 429 when none (`Infinity` when unlimited). Nothing is counted; `take` counts what was taken.
   */
  async room(kind: RateKind, key: string, now: number): Promise<number> {
    const limit = this.limitOf(kind)
    if (limit <= 0) return Infinity
    const w = await this.storeOf(kind).peek(`${kind}:${key}`, this.windowMs, now)
    if (w.count < limit) return limit - w.count
    const freeAt = w.oldestAt + this.windowMs
    const retryAfterS = Math.max(1, Math.ceil((freeAt - now) / 1000))
    throw this.refusal({ ...this.info(limit, 0, freeAt), allowed: false, retryAfterS }, 'messages')
  }

  /**
   * Counts `n` items taken in the window of `key` (after `room` allowed them) and returns the window as
   * it then stands. Concurrent takers may together pass the limit by what they took at once; the next
   * `room` then answers 429 until the window frees.
   */
  async take(kind: RateKind, key: string, n: number, now: number): Promise<RateInfo> {
    const limit = this.limitOf(kind)
    if (limit <= 0) return { limit: 0, remaining: 0, resetAt: 0, headers: {} }
    if (n <= 0) return this.peek(kind, key, now)
    const hit = await this.storeOf(kind).hit(`${kind}:${key}`, Number.MAX_SAFE_INTEGER, this.windowMs, now, n)
    return this.info(limit, Math.max(0, limit - hit.count), hit.oldestAt + this.windowMs)
  }

  private refusal(result: RateCheck, what: 'requests' | 'messages'): RelayError {
    return new RelayError(
      'rate_limit_exceeded',
      `Rate limit of ${result.limit} ${what} per minute exceeded; retry in ${result.retryAfterS} s`,
      { limit: result.limit, window: '1m', retry_after: result.retryAfterS },
      { ...result.headers, 'Retry-After': String(result.retryAfterS) },
    )
  }

  /** The window as it stands, without counting anything (for responses refused before the check). */
  async peek(kind: RateKind, key: string, now: number): Promise<RateInfo> {
    const limit = this.limitOf(kind)
    if (limit <= 0) return { limit: 0, remaining: 0, resetAt: 0, headers: {} }
    const w = await this.storeOf(kind).peek(`${kind}:${key}`, this.windowMs, now)
    if (w.count === 0) return this.info(limit, limit, now)
    return this.info(limit, Math.max(0, limit - w.count), w.oldestAt + this.windowMs)
  }

  /** Buckets with state per kind, in this process (health and tests). */
  tracked(): Record<RateKind, number> {
    const shared = this.shared as Partial<SlidingWindowCounters>
    const count = (kind: RateKind) => (kind === 'request' ? this.local.tracked('request:') : (shared.tracked?.(`${kind}:`) ?? 0))
    return { send: count('send'), poll: count('poll'), pollRequest: count('pollRequest'), request: count('request') }
  }

  /** Drops agents with nothing left in their window; returns how many were dropped. */
  async prune(now: number): Promise<number> {
    this.checksSincePrune = 0
    const local = this.local.pruneNow(this.windowMs, now)
    return local + (await this.shared.prune(this.windowMs, now))
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
