/**
 * The replay cache of SPEC §1.2 step 4: every accepted signature is kept for twice the timestamp window
 * (a replay is only possible while its timestamp is inside the window) and survives a restart.
 *
 * Lookups are in memory; each accepted signature is also appended to a log in the database through the
 * group commit, and a request proceeds only once its entry is committed. At start-up the log is read back,
 * so a signature accepted before a restart (or a kill -9) is still refused after it.
 */
import type { GroupCommit } from '../storage/group-commit.ts'
import type { ReplayRepo } from '../storage/replay-repo.ts'

/** 22 base64url characters = the first 128 bits of the signature; enough to identify it. */
const ID_CHARS = 22

export class ReplayCache {
  /** signature id → expiry (ms), in insertion order (≈ expiry order). */
  private readonly seen = new Map<string, number>()

  constructor(
    private readonly repo: ReplayRepo,
    private readonly writes: GroupCommit,
    now: number,
  ) {
    for (const row of repo.loadActive(now)) this.seen.set(row.signature, row.expires_at)
  }

  /**
   * Records a signature. Returns null for a replay (including a duplicate whose first copy is still
   * being written); otherwise a promise that resolves once the entry is committed.
   */
  reserve(signature: string, expiresAt: number): Promise<void> | null {
    const id = signature.slice(0, ID_CHARS)
    if (this.seen.has(id)) return null
    this.seen.set(id, expiresAt)
    return this.writes.write(() => this.repo.append(id, expiresAt)).catch((err) => {
      this.seen.delete(id) // not durable: let an honest retry through
      throw err
    })
  }

  /** Forgets expired entries in memory and in the log (bounded batches). */
  prune(now: number, batch: number): number {
    for (const [id, expiresAt] of this.seen) {
      if (expiresAt > now) break
      this.seen.delete(id)
    }
    let removed = 0
    for (let n = batch; n === batch; removed += n) n = this.repo.pruneExpired(now, batch)
    return removed
  }

  get size(): number {
    return this.seen.size
  }
}
