import type { Database } from 'bun:sqlite'

interface Pending {
  op: () => void
  resolve?: () => void
  reject?: (err: unknown) => void
}

/**
 * Group commit: writes queued during one turn of the event loop are committed together in one
 * transaction, and each waiter resolves only after that commit. Under load many concurrent requests
 * share one commit instead of paying one each; a lone request waits one loop turn.
 * If the batch fails, each write is retried in a transaction of its own so one bad write cannot fail
 * the others.
 */
export class GroupCommit {
  private queue: Pending[] = []
  private scheduled = false

  constructor(
    private readonly client: Database,
    private readonly onError: (err: unknown) => void = () => {},
    /** A batch this large commits at once rather than waiting for the end of the turn. */
    private readonly maxBatch = 1000,
  ) {}

  /** Queues a write; resolves once it is committed, rejects if it failed. */
  write(op: () => void): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queue.push({ op, resolve, reject })
      this.schedule()
    })
  }

  /** Queues a write nobody waits for (e.g. coalesced last-active updates). */
  writeLater(op: () => void): void {
    this.queue.push({ op })
    this.schedule()
  }

  private schedule(): void {
    if (this.queue.length >= this.maxBatch) return this.flush()
    if (this.scheduled) return
    this.scheduled = true
    setImmediate(() => this.flush())
  }

  get waiting(): number {
    return this.queue.length
  }

  /** Commits everything queued so far (also called directly on stop). */
  flush(): void {
    this.scheduled = false
    const batch = this.queue
    if (batch.length === 0) return
    this.queue = []
    try {
      // IMMEDIATE: take the write lock up front (other processes, e.g. relay admin, may write too)
      this.client.transaction(() => {
        for (const p of batch) p.op()
      }).immediate()
      for (const p of batch) p.resolve?.()
    } catch {
      for (const p of batch) {
        try {
          this.client.transaction(p.op).immediate()
          p.resolve?.()
        } catch (err) {
          if (p.reject) p.reject(err)
          else this.onError(err)
        }
      }
    }
  }
}
