/**
 * The webhook outbox pump (docs/protocol.md §9). Deliveries are rows of webhook_deliveries, queued in the same
 * transaction as their message; the pump starts the due ones — at once when a message is accepted
 * (`kick`), and from a periodic job for retries and after a restart — with at most `concurrency`
 * attempts in flight and a per-webhook share of them, so a slow receiver cannot starve the others.
 *
 * A delivery is claimed in storage before its attempt, with a lease (the attempt's timeout and a
 * margin): no other dispatcher — on this relay or another instance — takes it meanwhile, and an
 * attempt interrupted by a crash is made again once the lease ends (at least once).
 */
import type { Clock } from '../lib/clock.ts'
import type { Logger } from '../lib/logger.ts'
import { decodeBase64Url } from '../lib/base64url.ts'
import type { DueDelivery } from '../services/models/records.ts'
import type { Storage } from '../services/ports.ts'
import { attemptDelivery, deliveryBody, systemResolver, type AttemptOutcome, type AttemptResult, type Resolver } from './webhook-request.ts'

/** A claimed delivery stays ours this long past the attempt's timeout (writing its outcome, a slow disk). */
const LEASE_MARGIN_MS = 30_000

export interface DispatcherOptions {
  /** Delays before attempts 2…n (RELAY_WEBHOOK_RETRY_DELAYS); ±10 % jitter is added. */
  retryDelaysMs: number[]
  timeoutMs: number
  disableAfter: number
  allowPrivateTargets: boolean
  /** Attempts in flight at once, over all webhooks. */
  concurrency: number
}

export interface DispatcherDeps {
  storage: Storage
  clock: Clock
  logger: Logger
  fetch: typeof fetch
  /** Called once per attempt with its outcome (metrics). */
  onAttempt?: (outcome: AttemptOutcome) => void
  /** Called when a 2xx made messages delivered (metrics). */
  onDelivered?: (count: number) => void
}

interface InFlight {
  publicKey: string
  done: Promise<void>
}

export class WebhookDispatcher {
  private readonly inflight = new Map<string, InFlight>()
  /** Attempts in flight per webhook, and how many it may have. */
  private readonly perHook = new Map<string, { n: number; share: number }>()
  /** Webhooks whose last attempt failed: one attempt at a time until one succeeds. */
  private readonly failing = new Set<string>()
  private readonly stopping = new AbortController()
  private kickScheduled = false
  private pumping: Promise<void> = Promise.resolve()
  private pumpsWaiting = 0
  /** Set by stop: no new attempts start. */
  private draining = false
  private resolve: Resolver = systemResolver
  /** A healthy webhook may have this many attempts in flight; one that is failing gets one. */
  private readonly hookShare: number

  constructor(
    private readonly deps: DispatcherDeps,
    private readonly opts: DispatcherOptions,
  ) {
    this.hookShare = Math.max(1, Math.ceil(opts.concurrency / 4))
  }

  /** Replaces DNS resolution (tests point names at local addresses). */
  setResolver(resolve: Resolver): void {
    this.resolve = resolve
  }

  /** Starts due deliveries soon (once per event-loop turn however often it is called). */
  kick(): void {
    if (this.kickScheduled || this.draining) return
    this.kickScheduled = true
    setImmediate(() => {
      this.kickScheduled = false
      this.pump(this.deps.clock.now()).catch((err) => this.deps.logger.error('webhook dispatch failed', { error: String(err) }))
    })
  }

  /** Starts every delivery due at `now` that a free slot allows; resolves when those attempts ended. */
  async runOnce(now: number): Promise<{ started: number; in_flight: number }> {
    const started = await this.pump(now)
    await Promise.all(started)
    return { started: started.length, in_flight: this.inflight.size }
  }

  /** Resolves once no attempt is in flight and no kick is waiting (tests). */
  async whenIdle(): Promise<void> {
    while (this.inflight.size > 0 || this.kickScheduled || this.pumpsWaiting > 0) {
      if (this.inflight.size > 0) await Promise.all([...this.inflight.values()].map((f) => f.done))
      else await new Promise((r) => setImmediate(r))
    }
  }

  get inFlightCount(): number {
    return this.inflight.size
  }

  /**
   * Graceful stop: no new attempts; those in flight get `graceMs` to finish, then are aborted without
   * an outcome — their rows stay pending, so the next start makes them again.
   */
  async stop(graceMs: number): Promise<void> {
    this.draining = true
    const running = [...this.inflight.values()].map((f) => f.done)
    if (running.length) {
      const timer = setTimeout(() => this.stopping.abort(), graceMs)
      await Promise.all(running)
      clearTimeout(timer)
    }
    this.stopping.abort()
  }

  /** Pumps run one at a time, so two never hand out the same free slots. */
  private pump(now: number): Promise<Promise<void>[]> {
    this.pumpsWaiting++
    const run = this.pumping.then(() => this.pumpOnce(now)).finally(() => this.pumpsWaiting--)
    this.pumping = run.then(
      () => {},
      () => {},
    )
    return run
  }

  private async pumpOnce(now: number): Promise<Promise<void>[]> {
    if (this.draining) return []
    const free = this.opts.concurrency - this.inflight.size
    if (free <= 0) return []
    const busy = [...this.perHook].filter(([, h]) => h.n >= h.share).map(([k]) => k)
    const rows = await this.deps.storage.webhooks.claimDue(now, busy, free, now + this.opts.timeoutMs + LEASE_MARGIN_MS)
    const unused: DueDelivery[] = []
    const started: Promise<void>[] = []
    for (const row of rows) {
      if (started.length >= free) break
      if (this.inflight.has(row.deliveryId)) continue
      const share = row.consecutiveFailures > 0 || this.failing.has(row.publicKey) ? 1 : this.hookShare
      const hook = this.perHook.get(row.publicKey) ?? { n: 0, share }
      hook.share = Math.min(hook.share, share)
      if (hook.n >= hook.share) {
        unused.push(row)
        continue
      }
      hook.n++
      this.perHook.set(row.publicKey, hook)
      const done = this.attempt(row).finally(() => {
        this.inflight.delete(row.deliveryId)
        if (--hook.n <= 0) this.perHook.delete(row.publicKey)
        this.kick()
      })
      this.inflight.set(row.deliveryId, { publicKey: row.publicKey, done })
      started.push(done)
    }
    // claimed beyond a webhook's share: back to the queue, due at once for the next free slot
    for (const row of unused) await this.deps.storage.webhooks.release(row.deliveryId, now)
    return started
  }

  /** One attempt and its outcome, committed before the delivery leaves the in-flight set. */
  private async attempt(d: DueDelivery): Promise<void> {
    const { storage, clock } = this.deps
    try {
      const now = clock.now()
      const row = await storage.messages.find(d.messageId)
      // gone, expired or not the webhook owner's: nothing to deliver (docs/protocol.md §9: an expired message is not delivered)
      if (!row || row.expiresAt <= now || row.recipientKey !== d.publicKey || row.status === 'expired') {
        await storage.webhooks.finish(d.deliveryId)
        return
      }
      const secretBytes = decodeBase64Url(d.secret)
      const result: AttemptResult = secretBytes
        ? await attemptDelivery({
            fetch: this.deps.fetch,
            url: d.url,
            body: deliveryBody(d.deliveryId, row, now),
            secretBytes,
            deliveryId: d.deliveryId,
            now,
            timeoutMs: this.opts.timeoutMs,
            allowPrivateTargets: this.opts.allowPrivateTargets,
            resolve: this.resolve,
            signal: this.stopping.signal,
            logger: this.deps.logger,
          })
        : { outcome: 'refused', error: 'stored secret is unusable' }
      // a graceful stop cut it short: due again at once, for the next start (or another instance)
      if (result.outcome === 'aborted') return void (await storage.webhooks.release(d.deliveryId, clock.now()))
      this.deps.onAttempt?.(result.outcome)
      if (result.outcome === 'success') this.failing.delete(d.publicKey)
      else this.failing.add(d.publicKey)
      const after = clock.now()
      if (result.outcome === 'success') {
        let delivered = 0
        await storage.transaction(async (tx) => {
          await tx.webhooks.finish(d.deliveryId)
          delivered = await tx.messages.markDelivered([d.messageId], after)
          await tx.webhooks.resetFailures(d.publicKey, after)
        })
        if (delivered) this.deps.onDelivered?.(delivered)
        return
      }
      await this.failed(d, result.error ?? result.outcome, after)
    } catch (err) {
      this.deps.logger.error('webhook attempt failed unexpectedly', { delivery_id: d.deliveryId, error: String(err), stack: (err as Error)?.stack })
      // count it as a failed attempt so that a delivery that always fails this way cannot spin
      await this.failed(d, 'internal error', clock.now()).catch(() => {})
    }
  }

  /** A failed attempt: schedule the next one, or drop the message for the webhook after the last. */
  private async failed(d: DueDelivery, error: string, after: number): Promise<void> {
    const { storage } = this.deps
    const attempts = d.attempts + 1
    if (attempts <= this.opts.retryDelaysMs.length) {
      const next = after + jitter(this.opts.retryDelaysMs[attempts - 1])
      await storage.webhooks.recordFailure(d.deliveryId, attempts, next, error, after)
      return
    }
    // the last attempt failed: the message is dropped for this webhook and stays `sent`
    const s = await storage.transaction(async (tx) => {
      await tx.webhooks.finish(d.deliveryId)
      return tx.webhooks.addFailure(d.publicKey, this.opts.disableAfter, after)
    })
    this.deps.logger.warn('webhook delivery dropped', {
      delivery_id: d.deliveryId,
      agent: d.publicKey,
      attempts,
      error,
      consecutive_failures: s?.consecutiveFailures,
      disabled: s ? !s.enabled : undefined,
    })
  }
}

/** The delay ±10 % (docs/protocol.md §9), so that retries of many deliveries do not arrive in step. */
export function jitter(delayMs: number): number {
  return Math.round(delayMs * (0.9 + Math.random() * 0.2))
}
