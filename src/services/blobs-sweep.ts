/**
 * Blob cleanup (docs/protocol.md §6 Lifetime), run by the `sweep-blobs` job every RELAY_SWEEP_INTERVAL.
 * Reads already refuse expired records, so this only brings storage in line:
 *
 * 1. expired records that no unexpired message references are removed, in short batches;
 * 2. the bytes of the contents they named — and of records removed otherwise (DELETE, an agent
 *    deleted) — are removed once no record names them and no upload claimed them within the grace
 *    period;
 * 3. a slice of the blob store is compared with the records, so bytes whose records went some other
 *    way (a crash between a commit and a delete) are found within a full turn of slices. At start-up
 *    the whole store is compared once.
 *
 * Removing bytes follows the content bookkeeping of BlobRecordStore: mark the content (only when no
 * record names it and it was not claimed lately), delete the bytes, forget the mark. An upload that
 * meets the mark waits, so cleanup never takes bytes a record needs — on one relay or many.
 */
import type { Clock } from '../lib/clock.ts'
import type { Logger } from '../lib/logger.ts'
import { CONTENT_GRACE_MS } from './blobs.ts'
import type { BlobStore, Storage } from './ports.ts'

export interface BlobSweepResult {
  expired_records: number
  files_removed: number
  dirs_scanned: number
}

export interface BlobSweepOptions {
  /** Records removed per unit of work. */
  batch?: number
  /** Slices (of 256 hash prefixes) compared per run; a full turn takes 256 / this many runs. */
  dirsPerRun?: number
  /** How to let other work run between steps; tests may pass their own. */
  pause?: () => Promise<void>
}

/** A few ms per unit of work on ordinary hardware. */
const BATCH = 500
/** 16 of 256: every content is checked once per 16 runs (8 minutes at the default 30 s interval). */
const DIRS_PER_RUN = 16
/** Hash checks between two yields to the event loop. */
const CHECKS_PER_TURN = 100
const TOP_DIRS = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'))
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve))

export class BlobSweeper {
  private readonly candidates = new Set<string>()
  private readonly batch: number
  private readonly dirsPerRun: number
  private readonly pause: () => Promise<void>
  /** Where the rotating comparison resumes. */
  private nextDir = 0

  constructor(
    private readonly storage: Storage,
    private readonly store: BlobStore,
    private readonly clock: Clock,
    private readonly logger: Logger,
    opts: BlobSweepOptions = {},
  ) {
    this.batch = opts.batch ?? BATCH
    this.dirsPerRun = Math.max(1, Math.min(256, opts.dirsPerRun ?? DIRS_PER_RUN))
    this.pause = opts.pause ?? nextTurn
  }

  /** A record naming this content was removed; its bytes go at the next run if nothing needs them. */
  noteRemoved(hashHex: string): void {
    this.candidates.add(hashHex)
  }

  /** One run at `now`: expired records, then unused contents, then a slice of the store. */
  async runOnce(now: number): Promise<BlobSweepResult> {
    const result: BlobSweepResult = { expired_records: 0, files_removed: 0, dirs_scanned: 0 }
    for (;;) {
      const hashes = await this.storage.transaction((tx) => tx.blobs.removeExpiredBatch(now, this.batch))
      result.expired_records += hashes.length
      for (const h of hashes) this.candidates.add(h)
      if (hashes.length < this.batch) break
      await this.pause()
    }
    // removals a previous run (or instance) left half done
    for (const h of await this.storage.blobs.contentsMarkedDeleting(this.batch)) await this.dropContent(h)
    const candidates = [...this.candidates]
    this.candidates.clear()
    result.files_removed += await this.removeUnused(candidates, now)
    const dirs: string[] = []
    for (let i = 0; i < this.dirsPerRun; i++) dirs.push(TOP_DIRS[(this.nextDir + i) % 256])
    this.nextDir = (this.nextDir + this.dirsPerRun) % 256
    result.files_removed += await this.scan(dirs, now)
    result.dirs_scanned = dirs.length
    return result
  }

  /**
   * Start-up: removes staging of uploads the previous process never finished, then compares the
   * whole store with the records. Resolves with what it removed.
   */
  async startupCleanup(): Promise<{ temp_files: number; files_removed: number }> {
    const temp = await this.store.removeStaleStaging()
    const removed = await this.scanAll()
    if (temp || removed) this.logger.info('blob store cleaned at start-up', { temp_files: temp, files_removed: removed })
    return { temp_files: temp, files_removed: removed }
  }

  /** Compares the whole store with the records; resolves with how many contents it removed. */
  scanAll(): Promise<number> {
    return this.scan(TOP_DIRS, this.clock.now())
  }

  private async scan(prefixes: string[], now: number): Promise<number> {
    let removed = 0
    for (const prefix of prefixes) {
      const hashes: string[] = []
      for await (const h of this.store.list(prefix)) hashes.push(h)
      removed += await this.removeUnused(hashes, now)
    }
    return removed
  }

  /** Deletes a content marked for deletion, then forgets the mark (a crash between the two is redone). */
  private async dropContent(hash: string): Promise<void> {
    await this.store.delete(hash)
    await this.storage.blobs.forgetContent(hash)
  }

  private async removeUnused(hashes: string[], now: number): Promise<number> {
    let removed = 0
    for (let i = 0; i < hashes.length; i++) {
      const h = hashes[i]
      if (await this.storage.blobs.markContentDeleting(h, now - CONTENT_GRACE_MS, now)) {
        await this.dropContent(h)
        removed++
      }
      if ((i + 1) % CHECKS_PER_TURN === 0) await this.pause()
    }
    return removed
  }
}
