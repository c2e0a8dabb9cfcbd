/**
 * The expiry sweep (SPEC §4.6), run by the `expire-messages` job every RELAY_SWEEP_INTERVAL. Reads
 * already treat messages by time, so this only brings storage in line: `sent` past expiry → `expired`
 * with body and attachment links dropped; `delivered` past expiry → removed; expired envelopes →
 * removed after the retention. Works in bounded batches, each its own short transaction, and yields
 * to the event loop between batches so requests keep flowing while a large backlog expires.
 */
import type { MessagesRepo } from '../storage/messages-repo.ts'

export interface SweepResult {
  expired: number
  removed_delivered: number
  removed_expired: number
  batches: number
}

export interface SweepOptions {
  /** Rows per transaction. 1,000 keeps one batch to a few ms on modest hardware. */
  batchSize?: number
  /** How to let other work run between batches; tests may pass a no-op. */
  pause?: () => Promise<void>
}

const DEFAULT_BATCH = 1000
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve))

export class MessageSweeper {
  private readonly batchSize: number
  private readonly pause: () => Promise<void>

  constructor(
    private readonly repo: MessagesRepo,
    private readonly expiredRetentionMs: number,
    opts: SweepOptions = {},
  ) {
    this.batchSize = opts.batchSize ?? DEFAULT_BATCH
    this.pause = opts.pause ?? nextTurn
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
        const n = this.repo.transaction(() => step(this.batchSize))
        result[name] += n
        result.batches++
        if (n < this.batchSize) break
        await this.pause()
      }
    }
    return result
  }
}
