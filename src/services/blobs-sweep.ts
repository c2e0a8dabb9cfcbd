/**
 * Blob cleanup (SPEC §6 Lifetime), run by the `sweep-blobs` job every RELAY_SWEEP_INTERVAL. Reads
 * already refuse expired records, so this only brings storage in line:
 *
 * 1. expired records that no unexpired message references are removed, in short batches;
 * 2. the files of the hashes they named — and of records removed otherwise (DELETE) — are removed
 *    once no record names them;
 * 3. a slice of the blob directory is compared with the records, so that a file whose records went
 *    some other way (an agent deleted, a crash between a commit and an unlink) is found within a
 *    full turn of slices. At start-up the whole directory is compared once.
 *
 * Checking a hash and unlinking its file is one synchronous step (BlobStore.removeIfUnused), and an
 * upload pins its hash until its record is committed, so cleanup never takes bytes a record needs.
 */
import type { BlobStore } from '../blobs/blob-store.ts'
import type { Logger } from '../lib/logger.ts'
import type { BlobsRepo } from '../storage/blobs-repo.ts'

export interface BlobSweepResult {
  expired_records: number
  files_removed: number
  dirs_scanned: number
}

export interface BlobSweepOptions {
  /** Records removed per transaction. */
  batch?: number
  /** First-level directories (of 256) compared per run; a full turn takes 256 / this many runs. */
  dirsPerRun?: number
  /** How to let other work run between steps; tests may pass their own. */
  pause?: () => Promise<void>
}

/** A few ms per transaction on ordinary hardware. */
const BATCH = 500
/** 16 of 256: every file is checked once per 16 runs (8 minutes at the default 30 s interval). */
const DIRS_PER_RUN = 16
/** Hash checks between two yields to the event loop. */
const CHECKS_PER_TURN = 500
const TOP_DIRS = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'))
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve))

export class BlobSweeper {
  private readonly candidates = new Set<string>()
  private readonly batch: number
  private readonly dirsPerRun: number
  private readonly pause: () => Promise<void>
  /** Where the rotating directory comparison resumes. */
  private nextDir = 0

  constructor(
    private readonly repo: BlobsRepo,
    private readonly store: BlobStore,
    private readonly logger: Logger,
    opts: BlobSweepOptions = {},
  ) {
    this.batch = opts.batch ?? BATCH
    this.dirsPerRun = Math.max(1, Math.min(256, opts.dirsPerRun ?? DIRS_PER_RUN))
    this.pause = opts.pause ?? nextTurn
  }

  /** A record naming this content was removed; its file goes at the next run if no record is left. */
  noteRemoved(hashHex: string): void {
    this.candidates.add(hashHex)
  }

  /** One run at `now`: expired records, then unused files, then a slice of the directory. */
  async runOnce(now: number): Promise<BlobSweepResult> {
    const result: BlobSweepResult = { expired_records: 0, files_removed: 0, dirs_scanned: 0 }
    for (;;) {
      const hashes = this.repo.transaction(() => this.repo.removeExpiredBatch(now, this.batch))
      result.expired_records += hashes.length
      for (const h of hashes) this.candidates.add(h)
      if (hashes.length < this.batch) break
      await this.pause()
    }
    const candidates = [...this.candidates]
    this.candidates.clear()
    result.files_removed += await this.removeUnused(candidates)
    const dirs: string[] = []
    for (let i = 0; i < this.dirsPerRun; i++) dirs.push(TOP_DIRS[(this.nextDir + i) % 256])
    this.nextDir = (this.nextDir + this.dirsPerRun) % 256
    result.files_removed += await this.scan(dirs)
    result.dirs_scanned = dirs.length
    return result
  }

  /**
   * Start-up: removes temp files of uploads the previous process never finished, then compares the
   * whole blob directory with the records. Resolves with what it removed.
   */
  async startupCleanup(): Promise<{ temp_files: number; files_removed: number }> {
    const temp = this.store.removeStaleTempFiles()
    const removed = await this.scanAll(true)
    if (temp || removed) this.logger.info('blob store cleaned at start-up', { temp_files: temp, files_removed: removed })
    return { temp_files: temp, files_removed: removed }
  }

  /** Compares the whole blob directory with the records; resolves with how many files it removed. */
  scanAll(reportStrays = false): Promise<number> {
    return this.scan(this.store.topLevelDirs(), reportStrays)
  }

  private async scan(dirs: string[], reportStrays = false): Promise<number> {
    let removed = 0
    for (const top of dirs) {
      const { hashes, strays } = await this.store.listUnder(top)
      if (reportStrays) for (const stray of strays) this.logger.warn('unexpected file in the blob directory, left alone', { path: stray })
      removed += await this.removeUnused(hashes)
    }
    return removed
  }

  private async removeUnused(hashes: string[]): Promise<number> {
    let removed = 0
    for (let i = 0; i < hashes.length; i++) {
      if (this.store.removeIfUnused(hashes[i], (h) => this.repo.hashInUse(h))) removed++
      if ((i + 1) % CHECKS_PER_TURN === 0) await this.pause()
    }
    return removed
  }
}
