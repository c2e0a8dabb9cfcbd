/**
 * The expiry sweep (docs/protocol.md §4.6), run by the `expire-messages` job every RELAY_SWEEP_INTERVAL. Reads
 * already treat messages by time, so this only brings storage in line: `sent` past expiry → `expired`
 * with body and attachment links dropped; `delivered` past expiry → removed; expired envelopes →
 * removed after the retention.
 *
 * It walks messages_expires_idx from a persisted watermark: every message with expires_at at or before
 * the watermark has been handled, and a new message always expires after the moment it is created, so
 * each run only visits what expired since the last one (never the week of retained envelopes). Work
 * goes in bounded batches, each its own short transaction; the batch size adapts so that one batch
 * takes about `targetBatchMs` on any hardware. Between batches the sweep waits as long as the last batch
 * took (at least one turn of the event loop), so a large backlog — a million messages expiring at once —
 * takes at most half of the event loop while requests keep arriving, instead of all of it but one turn
 * per batch. Then it waits for the database to absorb the batch (Storage.caughtUp: on SQLite the WAL is
 * checkpointed while the sweep pauses), so requests never queue behind a checkpoint of its writes.
 */
import type { ExpireBatchResult, Storage, Stores, SweepCursor } from './ports.ts'

export interface SweepResult {
  expired: number
  removed_delivered: number
  removed_expired: number
  batches: number
}

export interface SweepOptions {
  /** Largest batch (rows per transaction). */
  maxBatch?: number
  /** Smallest batch the adaptation may shrink to. */
  minBatch?: number
  /** Aim for batches of about this long, so the event loop is never held much longer. */
  targetBatchMs?: number
  /** How to let other work run between batches, given how long the last batch took; tests may pass their own. */
  pause?: (lastBatchMs: number) => Promise<void>
}

/** 1,000 rows take a few ms on ordinary hardware; slow disks shrink it through the adaptation. */
const MAX_BATCH = 1000
const MIN_BATCH = 50
/**
 * A request arriving during a batch waits for it: short batches keep that wait small. Measured on a
 * backlog of 500,000 (bench/messages.ts): 10 ms batches made the p99 of sends meanwhile 37 ms, 4 ms
 * batches 25–26 ms, for a sweep 60 % longer (4,800 messages/s instead of 7,700).
 */
const TARGET_BATCH_MS = 4
/** relay_state key: expires_at up to which every message has been swept. */
export const SWEEP_WATERMARK_KEY = 'messages.sweep_watermark'
/** Waits as long as the last batch held the event loop: the sweep's share of it stays ≤ 1/2 under a backlog. */
const yieldAsLong = (lastBatchMs: number) =>
  new Promise<void>((resolve) => (lastBatchMs >= 1 ? setTimeout(resolve, lastBatchMs) : setImmediate(resolve)))

export class MessageSweeper {
  private readonly maxBatch: number
  private readonly minBatch: number
  private readonly targetMs: number
  private readonly pause: (lastBatchMs: number) => Promise<void>
  private lastBatchMs = 0
  /** Carried from run to run: what the last batches showed this machine can do. */
  private batch: number

  constructor(
    private readonly storage: Storage,
    private readonly expiredRetentionMs: number,
    opts: SweepOptions = {},
  ) {
    this.maxBatch = opts.maxBatch ?? MAX_BATCH
    this.minBatch = Math.min(opts.minBatch ?? MIN_BATCH, this.maxBatch)
    this.targetMs = opts.targetBatchMs ?? TARGET_BATCH_MS
    this.pause = opts.pause ?? yieldAsLong
    this.batch = Math.max(this.minBatch, Math.min(this.maxBatch, 250))
  }

  /** One full sweep at `now`; resolves with how many rows each step touched. */
  async runOnce(now: number): Promise<SweepResult> {
    const result: SweepResult = { expired: 0, removed_delivered: 0, removed_expired: 0, batches: 0 }
    // every message expires after the epoch: 0 is before all of them
    const watermark = (await this.storage.state.getNumber(SWEEP_WATERMARK_KEY)) ?? 0
    if (watermark < now) {
      // expired since the last run: sent → expired, delivered → removed
      let pos: SweepCursor = { expiresAt: watermark, key: null }
      for (;;) {
        const size = this.batch
        const b: ExpireBatchResult = await this.timed(size, (tx) => tx.messages.expireBatch(pos, now, size))
        result.expired += b.expired
        result.removed_delivered += b.removed
        result.batches++
        pos = b.last
        if (b.scanned < size) break
        await this.between()
      }
      await this.storage.state.setNumber(SWEEP_WATERMARK_KEY, now)
    }
    // envelopes past the retention (and anything else that old)
    const cutoff = now - this.expiredRetentionMs
    for (;;) {
      const size = this.batch
      const n = await this.timed(size, (tx) => tx.messages.removeExpiredBatch(cutoff, size))
      result.removed_expired += n
      result.batches++
      if (n < size) break
      await this.between()
    }
    return result
  }

  /** Between batches: the event loop's share for requests, then the database's turn to absorb the batch. */
  private async between(): Promise<void> {
    await this.pause(this.lastBatchMs)
    await this.storage.caughtUp?.()
  }

  /** Runs one batch in its own transaction and adapts the next batch size to how long it took. */
  private async timed<T extends number | { scanned: number }>(size: number, step: (tx: Stores) => Promise<T>): Promise<T> {
    const started = performance.now()
    const out = await this.storage.transaction(step)
    const elapsed = performance.now() - started
    this.lastBatchMs = elapsed
    const full = (typeof out === 'number' ? out : out.scanned) === size
    if (elapsed > this.targetMs * 1.5) this.batch = Math.max(this.minBatch, Math.floor(size / 2))
    else if (full && elapsed < this.targetMs / 2) this.batch = Math.min(this.maxBatch, size * 2)
    return out
  }
}
