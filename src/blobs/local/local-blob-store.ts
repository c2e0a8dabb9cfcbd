/**
 * The content-addressed directory (docs/protocol.md §6), the embedded default: uploads stream into a
 * temp file while SHA-256 is computed, are flushed to disk (fdatasync) and renamed to
 * `blobs/<aa>/<bb>/<sha256 hex>` with the directory flushed too, so identical bytes are stored once
 * however many records name them. Files are never modified once placed.
 *
 * Bytes only: which hashes are wanted, and when one may be removed, is the blob records' business.
 */
import { randomBytes } from 'node:crypto'
import { constants, mkdirSync, readdirSync, statfsSync, unlinkSync } from 'node:fs'
import { access, mkdir, open, readdir, rename, stat, unlink, type FileHandle } from 'node:fs/promises'
import { basename, dirname, join } from 'node:path'

import { BlobTooLargeError, type BlobStore, type ReceiveOptions, type StagedBlob } from '../../services/ports.ts'
import { assertContentHash, assertHashSlice, HASH_SLICE, receiveError, receiveInto, SHA256_HEX, StagingBudget, stagedBlob, type StagingSink } from '../receive-into.ts'

const TEMP_PREFIX = 'upload-'
/**
 * Bytes gathered before one write: few syscalls, and at most two batches are ever held in memory, so
 * an upload keeps about 0.5 MiB of its own besides the runtime's current chunk (uploads not yet verified
 * are counted at 3 MiB each against the pre-auth budget, with the runtime's buffers).
 */
const WRITE_BATCH_BYTES = 256 * 1024
/** Bytes read per step when hashing a written file: one buffer per upload, reused throughout. */
const HASH_READ_BYTES = 1024 * 1024

export class LocalBlobStore implements BlobStore {
  readonly kind = 'directory'
  /** Temp files of this process's uploads that are not yet placed or discarded: never stale. */
  private readonly staged = new Set<string>()
  private readonly budget: StagingBudget
  private uploadsInFlight = 0

  constructor(
    /** paths.blobs: the content-addressed tree; created when missing. */
    readonly root: string,
    /** paths.tmp: uploads in progress; on the same file system, so placing a file is a rename. */
    readonly tmpDir: string,
    /**
     * Disk that temp files of uploads may use before their signature is checked, over all uploads.
     * Beyond it, bytes are only hashed, never written.
     */
    preAuthDiskBytes = Number.POSITIVE_INFINITY,
  ) {
    this.budget = new StagingBudget(preAuthDiskBytes)
    this.ensureDirs()
  }

  /** Creates the directories if missing (a data directory restored without its blobs). */
  private ensureDirs(): void {
    mkdirSync(this.root, { recursive: true, mode: 0o700 })
    mkdirSync(this.tmpDir, { recursive: true, mode: 0o700 })
  }

  /** Uploads currently streaming into temp files (health details). */
  get inFlight(): number {
    return this.uploadsInFlight
  }

  /** Bytes in temp files of uploads not yet placed or discarded: the pre-auth disk budget in use. */
  get unverifiedBytes(): number {
    return this.budget.bytes
  }

  /** Where the bytes with this SHA-256 live; for this store and its tests only. */
  pathOf(hashHex: string): string {
    assertContentHash(hashHex)
    return join(this.root, hashHex.slice(0, 2), hashHex.slice(2, 4), hashHex)
  }

  /**
   * A body of declared size that is worth keeping is written by Bun natively — the bytes never become
   * JavaScript objects, so memory stays flat however large the blob — then hashed from the page cache
   * while the flush runs. Any other body (no Content-Length: the limit must be enforced as bytes
   * arrive; or bytes only hashed, never kept) is read chunk by chunk.
   */
  async receive(body: ReadableStream<Uint8Array> | null, opts: ReceiveOptions): Promise<StagedBlob> {
    const declared = opts.declaredBytes ?? null
    const tempPath = join(this.tmpDir, `${TEMP_PREFIX}${randomBytes(12).toString('hex')}`)
    this.uploadsInFlight++
    this.staged.add(tempPath)
    try {
      // the whole declared size must fit the pre-auth disk budget; else the bytes go the slow way
      const native = declared !== null && declared <= opts.maxBytes && (!opts.keep || opts.keep(declared)) && this.budget.claim(tempPath, declared)
      const staged = native
        ? await this.receiveNative(body, opts.maxBytes, tempPath)
        : await receiveInto(body, opts, () => TempFileSink.create(tempPath), this.budget, tempPath)
      if (staged.staging === null) this.staged.delete(tempPath)
      return staged
    } catch (err) {
      this.staged.delete(tempPath)
      this.budget.release(tempPath)
      throw receiveError(err)
    } finally {
      this.uploadsInFlight--
    }
  }

  private async receiveNative(body: ReadableStream<Uint8Array> | null, maxBytes: number, tempPath: string): Promise<StagedBlob> {
    try {
      // created here so that it is new and private; Bun.write then fills it
      await (await open(tempPath, 'wx', 0o600)).close()
      const size = await Bun.write(tempPath, new Response(body))
      // only an in-process caller can send more than it declared; HTTP framing stops anyone else
      if (size > maxBytes) throw new BlobTooLargeError(maxBytes)
      const file = await open(tempPath, 'r+')
      try {
        const [digest] = await Promise.all([hashFile(file), file.datasync()])
        return stagedBlob(digest, size, tempPath)
      } finally {
        await file.close()
      }
    } catch (err) {
      await unlink(tempPath).catch(() => {})
      throw err
    }
  }

  /**
   * Renames the temp file to its content address, or drops it when that content is already stored
   * (a file of another size there is damaged and replaced). Durable once it resolves: the file was
   * flushed by `receive`, the rename is flushed with its directory.
   */
  async place(staged: StagedBlob): Promise<void> {
    const tempPath = this.stagingPath(staged)
    const target = this.pathOf(staged.hashHex)
    // the signature was checked before this is called: the bytes no longer count as unverified
    this.budget.release(tempPath)
    try {
      if ((await this.size(staged.hashHex)) === staged.size) {
        await unlink(tempPath).catch(() => {})
        return
      }
      const dir = dirname(target)
      const created = await mkdir(dir, { recursive: true, mode: 0o700 })
      await rename(tempPath, target)
      await syncDir(dir)
      // a directory created just now is itself an entry of its parent
      if (created) {
        for (let d = dir; d !== this.root && d.length >= created.length; d = dirname(d)) await syncDir(dirname(d))
      }
    } catch (err) {
      throw receiveError(err)
    } finally {
      this.staged.delete(tempPath)
    }
  }

  async discard(staged: StagedBlob): Promise<void> {
    if (staged.staging === null) return
    const tempPath = this.stagingPath(staged)
    await unlink(tempPath).catch(() => {})
    this.staged.delete(tempPath)
    this.budget.release(tempPath)
  }

  async size(hashHex: string): Promise<number | null> {
    try {
      const s = await stat(this.pathOf(hashHex))
      return s.isFile() ? s.size : null
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null
      throw err
    }
  }

  /** A lazy file slice: the server sends it from the file without copying it through JavaScript. */
  async read(hashHex: string, range?: { start: number; end: number }): Promise<Blob> {
    const file = Bun.file(this.pathOf(hashHex))
    return range ? file.slice(range.start, range.end + 1) : file
  }

  async delete(hashHex: string): Promise<void> {
    try {
      await unlink(this.pathOf(hashHex))
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
    }
  }

  /** Walks `blobs/<prefix>/<bb>/`; names that are not a hash in its right place are left out. */
  async *list(prefix: string): AsyncIterable<string> {
    assertHashSlice(prefix)
    const top = join(this.root, prefix)
    for (const second of (await readdirOrEmpty(top)).sort()) {
      if (!HASH_SLICE.test(second)) continue
      for (const name of (await readdirOrEmpty(join(top, second))).sort()) {
        if (SHA256_HEX.test(name) && name.startsWith(prefix + second)) yield name
      }
    }
  }

  /**
   * Removes temp files that no upload of this process holds: those of a previous process that stopped
   * during an upload, or of an upload whose bytes were never placed nor discarded. The directory
   * belongs to one relay process, so a file this process does not hold can no longer finish.
   * Synchronous on purpose (a handful of unlinks): called at start-up, the files are gone before the
   * relay takes its first upload.
   */
  async removeStaleStaging(): Promise<number> {
    let removed = 0
    let names: string[]
    try {
      names = readdirSync(this.tmpDir)
    } catch {
      return 0
    }
    for (const name of names) {
      const path = join(this.tmpDir, name)
      if (!name.startsWith(TEMP_PREFIX) || this.staged.has(path)) continue
      try {
        unlinkSync(path)
        removed++
      } catch {
        // gone already
      }
    }
    return removed
  }

  /** Free bytes for unprivileged writers on the blob file system. */
  async freeBytes(): Promise<number | null> {
    try {
      const s = statfsSync(this.root)
      return Number(s.bavail) * Number(s.bsize)
    } catch {
      return null
    }
  }

  /** Start-up: the directories exist (they were just created) and take writes. */
  async check(): Promise<void> {
    const problem = await this.ready()
    if (problem) throw new Error(problem)
  }

  /** Writes, flushes and removes a small file where uploads go: what every upload will need. */
  async ready(): Promise<string | null> {
    const probe = join(this.tmpDir, `ready-${randomBytes(6).toString('hex')}`)
    try {
      const file = await open(probe, 'wx', 0o600)
      try {
        await file.write(Buffer.from('ready'))
        await file.datasync()
      } finally {
        await file.close()
      }
      // placing is a rename into the tree: it must be a directory this process can write
      if (!(await stat(this.root)).isDirectory()) throw new Error(`${this.root} is not a directory`)
      await access(this.root, constants.W_OK)
      return null
    } catch (err) {
      return `blob directory not writable: ${(err as Error).message.split('\n')[0]}`
    } finally {
      await unlink(probe).catch(() => {})
    }
  }

  private stagingPath(staged: StagedBlob): string {
    if (staged.staging === null || dirname(staged.staging) !== dirname(join(this.tmpDir, TEMP_PREFIX)) || !basename(staged.staging).startsWith(TEMP_PREFIX)) {
      throw new Error(`not a staging file of this store: ${String(staged.staging).slice(0, 200)}`)
    }
    return staged.staging
  }
}

/**
 * A temp file written in batches, one write in flight while the next batch arrives, flushed to disk
 * (fdatasync) before it counts as received.
 */
class TempFileSink implements StagingSink {
  private batch: Uint8Array[] = []
  private batchBytes = 0
  private writing: Promise<unknown> = Promise.resolve()

  private constructor(
    private readonly path: string,
    private file: FileHandle | null,
  ) {}

  static async create(path: string): Promise<TempFileSink> {
    return new TempFileSink(path, await open(path, 'wx', 0o600))
  }

  get gathered(): number {
    return this.batchBytes
  }

  async write(chunk: Uint8Array): Promise<void> {
    this.batch.push(chunk)
    this.batchBytes += chunk.byteLength
    // one write in flight while the next batch arrives
    if (this.batchBytes >= WRITE_BATCH_BYTES) await this.idle()
  }

  async idle(): Promise<void> {
    const file = this.file
    if (!file || this.batchBytes === 0) return
    await this.writing
    this.writing = writeAll(file, this.batch)
    this.batch = []
    this.batchBytes = 0
  }

  async finish(): Promise<string> {
    const file = this.file
    if (!file) throw new Error('temp file already closed')
    await this.writing
    if (this.batch.length) await writeAll(file, this.batch)
    await file.datasync()
    this.file = null
    await file.close()
    return this.path
  }

  async drop(): Promise<void> {
    await this.writing
    await this.close()
  }

  async abort(): Promise<void> {
    await this.writing.catch(() => {})
    await this.close().catch(() => {})
  }

  private async close(): Promise<void> {
    const file = this.file
    this.file = null
    this.batch = []
    this.batchBytes = 0
    try {
      await file?.close()
    } finally {
      await unlink(this.path).catch(() => {})
    }
  }
}

async function readdirOrEmpty(dir: string): Promise<string[]> {
  try {
    return await readdir(dir)
  } catch {
    return []
  }
}

/** SHA-256 of a whole file, read through one reused buffer (no garbage however large the file). */
async function hashFile(file: FileHandle): Promise<Buffer> {
  const hasher = new Bun.CryptoHasher('sha256')
  const buffer = Buffer.allocUnsafe(HASH_READ_BYTES)
  for (let position = 0; ; ) {
    const { bytesRead } = await file.read(buffer, 0, buffer.length, position)
    if (bytesRead === 0) break
    hasher.update(buffer.subarray(0, bytesRead))
    position += bytesRead
  }
  return hasher.digest()
}

async function writeAll(file: FileHandle, chunks: Uint8Array[]): Promise<void> {
  let total = 0
  for (const c of chunks) total += c.byteLength
  const { bytesWritten } = await file.writev(chunks)
  if (bytesWritten < total) {
    // short write (rare: signals, full disks): finish the rest piece by piece
    let skip = bytesWritten
    for (const c of chunks) {
      if (skip >= c.byteLength) {
        skip -= c.byteLength
        continue
      }
      let view = c.subarray(skip)
      skip = 0
      while (view.byteLength) {
        const { bytesWritten: n } = await file.write(view)
        view = view.subarray(n)
      }
    }
  }
}

/** Flushes a directory so that a rename or a new entry in it survives a crash. */
async function syncDir(dir: string): Promise<void> {
  const handle = await open(dir, 'r')
  try {
    await handle.sync()
  } catch {
    // some file systems refuse fsync on directories; the data itself was flushed
  } finally {
    await handle.close()
  }
}
