import type { Database } from 'bun:sqlite'

interface Pending<T> {
  item: T
  resolve: () => void
  reject: (err: unknown) => void
}

/**
 * Group commit. Each commit costs a round of WAL writes however small the transaction, so writes that
 * arrive in the same event-loop turn are applied together in one transaction at the end of the turn
 * (or as soon as `maxBatch` are waiting), and each caller's promise resolves only once that
 * transaction has committed — so an answer sent after `await submit(…)` still means "durable".
 * If the shared transaction fails, every item is retried in a transaction of its own, so one bad item
 * fails alone.
 */
export class CommitQueue<T> {
  private pending: Pending<T>[] = []
  private scheduled = false

  constructor(
    private readonly client: Database,
    /** Applies one item; runs inside a transaction, must be synchronous. */
    private readonly write: (item: T) => void,
    private readonly maxBatch = 1000,
  ) {}

  /** Resolves once `item` is committed; rejects with the error its write raised. */
  submit(item: T): Promise<void> {
    return new Promise((resolve, reject) => {
      this.pending.push({ item, resolve, reject })
      if (this.pending.length >= this.maxBatch) this.flush()
      else if (!this.scheduled) {
        this.scheduled = true
        setImmediate(() => this.flush())
      }
    })
  }

  /** Commits whatever is waiting, now. */
  flush(): void {
    this.scheduled = false
    const batch = this.pending
    if (batch.length === 0) return
    this.pending = []
    try {
      this.client.transaction(() => {
        for (const p of batch) this.write(p.item)
      }).immediate()
    } catch {
      for (const p of batch) {
        try {
          this.client.transaction(() => this.write(p.item)).immediate()
        } catch (err) {
          p.reject(err)
          continue
        }
        p.resolve()
      }
      return
    }
    for (const p of batch) p.resolve()
  }

  get waiting(): number {
    return this.pending.length
  }
}
