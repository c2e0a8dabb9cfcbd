/**
 * The expiry sweep (SPEC §4.6), run by the `expire-messages` job every RELAY_SWEEP_INTERVAL. Reads
 * already treat messages by time, so this only brings storage in line: `sent` past expiry → `expired`
 * with body and attachment links dropped; `delivered` past expiry → removed; expired envelopes →
 * removed after the retention. Works in bounded batches, each its own short transaction, yielding to
 * the event loop between batches so requests keep flowing while a large backlog expires. The batch
 * size adapts to how long batches take, so one batch stays near `targetBatchMs` on any hardware.
 */
import type { MessagesRepo } from '../storage/messages-repo.ts'

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
  /** How to let other work run between batches; tests may pass their own. */
  pause?: () => Promise<void>
}

/** 1,000 rows take a few ms on ordinary hardware; slow disks shrink it through the adaptation. */
const MAX_BATCH = 1000
const MIN_BATCH = 50
/** Well under the 50 ms a request may wait, leaving room for a WAL checkpoint in the same commit. */
const TARGET_BATCH_MS = 10
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve))

export class MessageSweeper {
  private readonly maxBatch: number
  private readonly minBatch: number
  private readonly targetMs: number
  private readonly pause: () => Promise<void>
  /** Carried from run to run: what the last batches showed this machine can do. */
  private batch: number

  constructor(
    private readonly repo: MessagesRepo,
    private readonly expiredRetentionMs: number,
    opts: SweepOptions = {},
  ) {
    this.maxBatch = opts.maxBatch ?? MAX_BATCH
    this.minBatch = Math.min(opts.minBatch ?? MIN_BATCH, this.maxBatch)
    this.targetMs = opts.targetBatchMs ?? TARGET_BATCH_MS
    this.pause = opts.pause ?? nextTurn
    this.batch = Math.max(this.minBatch, Math.min(this.maxBatch, 250))
  }

  /** One full sweep at `now`; resolves with how many rows each step touched. */
  async runOnce(now: number): Promise<SweepResult> {
    const result: SweepResult = { expired: 0, removed_delivered: 0, removed_expired: 0, batches: 0 }
    const cutoff = now - this.expiredRetentionMs
    const steps: [keyof Omit<SweepResult, 'batches'>, (limit: number) => number][] = [
      ['expired', (limit) => this.repo.expireSentBatch(now, limit)],
      ['removed_delivered', (limit) => this.repo.removeDeliveredBatch(now, limit)],
      ['removed_expired', (limit) => this.repo.removeExpiredBatch(cutoff, limit)],
    ]
    for (const [name, step] of steps) {
      for (;;) {
        const size = this.batch
        const started = performance.now()
        const n = this.repo.transaction(() => step(size))
        this.adapt(performance.now() - started, n, size)
        result[name] += n
        result.batches++
        if (n < size) break
        await this.pause()
      }
    }
    return result
  }

  /** Halves the batch after a slow one, doubles it after a quick full one, within the bounds. */
  private adapt(elapsedMs: number, rows: number, size: number): void {
    if (elapsedMs > this.targetMs * 1.5) this.batch = Math.max(this.minBatch, Math.floor(size / 2))
    else if (rows === size && elapsedMs < this.targetMs / 2) this.batch = Math.min(this.maxBatch, size * 2)
  }
}
