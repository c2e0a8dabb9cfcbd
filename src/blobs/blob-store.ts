/**
 * The content-addressed file store of SPEC §6: uploads stream into a temp file while SHA-256 is
 * computed, are flushed to disk (fdatasync) and renamed to `blobs/<aa>/<bb>/<sha256 hex>`, so identical
 * bytes are stored once however many records name them. Files are never modified once placed.
 *
 * Knows files only; which hashes are still wanted is the blob records' business. A hash is "pinned"
 * while an upload is placing it and its record is not yet committed, so a cleanup running meanwhile
 * (which checks pins and records and unlinks in one synchronous step) never removes it.
 */
import { randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, readdirSync, statfsSync, unlinkSync } from 'node:fs'
import { mkdir, open, readdir, rename, stat, unlink, type FileHandle } from 'node:fs/promises'
import { dirname, join } from 'node:path'

/** Thrown by `receive` when the body passes `maxBytes`; nothing is kept. */
export class BlobTooLargeError extends Error {
  constructor(readonly limitBytes: number) {
    super(`Blob exceeds ${limitBytes} bytes`)
    this.name = 'BlobTooLargeError'
  }
}

export interface ReceiveOptions {
  /** Largest body accepted; one byte more stops the upload with BlobTooLargeError. */
  maxBytes: number
  /**
   * Asked as bytes arrive (with the count so far) whether they are still worth writing; once it
   * answers false the rest is only hashed, never written (an upload that cannot fit the quota is
   * read to the end so its signature can be checked, but costs no disk).
   */
  keep?: (receivedBytes: number) => boolean
  /** The size the request declares (Content-Length), when it does; at most `maxBytes`. */
  declaredBytes?: number | null
}

export interface ReceivedBlob {
  /** The temp file holding the bytes (flushed to disk), or null when they were discarded. */
  tempPath: string | null
  /** SHA-256, lowercase hex: the content address and the `hash` of SPEC §6. */
  hashHex: string
  /** SHA-256, unpadded base64url: the BODY_HASH of the signature (SPEC §1.1). */
  hashBase64Url: string
  size: number
}

export const SHA256_HEX = /^[0-9a-f]{64}$/
const TEMP_PREFIX = 'upload-'
/** Bytes gathered before one write: few syscalls, and at most two batches are ever held in memory. */
const WRITE_BATCH_BYTES = 1024 * 1024

export class BlobStore {
  private readonly pins = new Map<string, number>()
  private uploadsInFlight = 0

  constructor(
    /** paths.blobs: the content-addressed tree. */
    readonly root: string,
    /** paths.tmp: uploads in progress; on the same file system, so placing a file is a rename. */
    readonly tmpDir: string,
  ) {}

  /** Where the bytes with this SHA-256 (lowercase hex) live; the hash must be checked first. */
  pathOf(hashHex: string): string {
    if (!SHA256_HEX.test(hashHex)) throw new Error(`not a SHA-256 hex digest: ${hashHex.slice(0, 80)}`)
    return join(this.root, hashHex.slice(0, 2), hashHex.slice(2, 4), hashHex)
  }

  /** Size of the stored file, or null when there is none. */
  async sizeOf(hashHex: string): Promise<number | null> {
    try {
      const s = await stat(this.pathOf(hashHex))
      return s.isFile() ? s.size : null
    } catch {
      return null
    }
  }

  /** Uploads currently streaming into temp files (health details). */
  get inFlight(): number {
    return this.uploadsInFlight
  }

  /**
   * Streams `body` into a new temp file and hashes it; the file is flushed to disk before this
   * resolves. On any failure (too large, the client went away, disk full) the temp file is removed
   * before the error propagates.
   *
   * A body of declared size that is worth keeping is written by Bun natively — the bytes never become
   * JavaScript objects, so memory stays flat however large the blob — then hashed from the page cache
   * while the flush runs. Any other body (no Content-Length: the limit must be enforced as bytes
   * arrive; or bytes only hashed, never kept) is read chunk by chunk here.
   */
  async receive(body: ReadableStream<Uint8Array> | null, opts: ReceiveOptions): Promise<ReceivedBlob> {
    const declared = opts.declaredBytes ?? null
    this.uploadsInFlight++
    try {
      if (declared !== null && declared <= opts.maxBytes && (!opts.keep || opts.keep(declared))) {
        return await this.receiveNative(body, opts.maxBytes)
      }
      return await this.receiveChunks(body, opts)
    } finally {
      this.uploadsInFlight--
    }
  }

  private async receiveNative(body: ReadableStream<Uint8Array> | null, maxBytes: number): Promise<ReceivedBlob> {
    const tempPath = this.newTempPath()
    try {
      // created here so that it is new and private; Bun.write then fills it
      await (await open(tempPath, 'wx', 0o600)).close()
      const size = await Bun.write(tempPath, new Response(body))
      // only an in-process caller can send more than it declared; HTTP framing stops anyone else
      if (size > maxBytes) throw new BlobTooLargeError(maxBytes)
      const file = await open(tempPath, 'r+')
      try {
        const [digest] = await Promise.all([hashFile(file), file.datasync()])
        return { tempPath, hashHex: digest.toString('hex'), hashBase64Url: digest.toString('base64url'), size }
      } finally {
        await file.close()
      }
    } catch (err) {
      await unlink(tempPath).catch(() => {})
      throw err
    }
  }

  private newTempPath(): string {
    return join(this.tmpDir, `${TEMP_PREFIX}${randomBytes(12).toString('hex')}`)
  }

  private async receiveChunks(body: ReadableStream<Uint8Array> | null, opts: ReceiveOptions): Promise<ReceivedBlob> {
    const hasher = new Bun.CryptoHasher('sha256')
    const tempPath = this.newTempPath()
    let file: FileHandle | null = await open(tempPath, 'wx', 0o600)
    let size = 0
    let batch: Uint8Array[] = []
    let batchBytes = 0
    let writing: Promise<unknown> = Promise.resolve()
    const reader = body?.getReader()
    try {
      if (reader) {
        for (;;) {
          const { done, value } = await reader.read()
          if (done) break
          if (value.byteLength === 0) continue
          size += value.byteLength
          if (size > opts.maxBytes) throw new BlobTooLargeError(opts.maxBytes)
          hasher.update(value)
          if (file && opts.keep && !opts.keep(size)) {
            // no longer worth the disk: drop what was written, keep hashing
            await writing
            await file.close()
            file = null
            await unlink(tempPath).catch(() => {})
            batch = []
            batchBytes = 0
          }
          if (!file) continue
          batch.push(value)
          batchBytes += value.byteLength
          if (batchBytes >= WRITE_BATCH_BYTES) {
            // one write in flight while the next batch arrives
            await writing
            writing = writeAll(file, batch)
            batch = []
            batchBytes = 0
          }
        }
      }
      if (file) {
        await writing
        if (batch.length) await writeAll(file, batch)
        await file.datasync()
        await file.close()
        file = null
        const digest = hasher.digest()
        return { tempPath, hashHex: digest.toString('hex'), hashBase64Url: digest.toString('base64url'), size }
      }
      const digest = hasher.digest()
      return { tempPath: null, hashHex: digest.toString('hex'), hashBase64Url: digest.toString('base64url'), size }
    } catch (err) {
      reader?.cancel().catch(() => {})
      await writing.catch(() => {})
      await file?.close().catch(() => {})
      file = null
      await unlink(tempPath).catch(() => {})
      throw err
    }
  }

  /** Removes a temp file left by `receive` (after a failed check, or once its bytes were already stored). */
  async discard(tempPath: string | null): Promise<void> {
    if (tempPath) await unlink(tempPath).catch(() => {})
  }

  /**
   * Moves a received temp file to its content address, or drops it when that content is already
   * stored (a file of another size there is damaged and replaced). Call with the hash pinned. Durable
   * once it resolves: the file was flushed by `receive`, the rename is flushed with the directory.
   */
  async place(tempPath: string, hashHex: string, sizeBytes: number): Promise<void> {
    const target = this.pathOf(hashHex)
    if ((await this.sizeOf(hashHex)) === sizeBytes) {
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
  }

  /** Marks a hash as being placed: cleanup leaves its file alone until `unpin`. */
  pin(hashHex: string): void {
    this.pins.set(hashHex, (this.pins.get(hashHex) ?? 0) + 1)
  }

  unpin(hashHex: string): void {
    const n = (this.pins.get(hashHex) ?? 1) - 1
    if (n <= 0) this.pins.delete(hashHex)
    else this.pins.set(hashHex, n)
  }

  /**
   * Removes the file of `hashHex` unless it is pinned or `stillWanted(hash)` says a record uses it.
   * Synchronous on purpose: the check and the unlink happen in one step of the event loop, so an
   * upload cannot commit a record for the hash in between. Returns whether a file was removed.
   */
  removeIfUnused(hashHex: string, stillWanted: (hashHex: string) => boolean): boolean {
    if (!SHA256_HEX.test(hashHex) || this.pins.has(hashHex) || stillWanted(hashHex)) return false
    try {
      unlinkSync(this.pathOf(hashHex))
      return true
    } catch {
      return false
    }
  }

  /**
   * Removes temp files of uploads that can no longer finish (the previous process stopped during
   * them). Call at start-up, before the relay accepts uploads. Returns how many were removed.
   */
  removeStaleTempFiles(): number {
    let removed = 0
    let names: string[]
    try {
      names = readdirSync(this.tmpDir)
    } catch {
      return 0
    }
    for (const name of names) {
      if (!name.startsWith(TEMP_PREFIX)) continue
      try {
        unlinkSync(join(this.tmpDir, name))
        removed++
      } catch {
        // gone already
      }
    }
    return removed
  }

  /** The first-level directories (`aa`) that exist, in order; a full scan visits each. */
  topLevelDirs(): string[] {
    if (!existsSync(this.root)) return []
    return readdirSync(this.root)
      .filter((n) => /^[0-9a-f]{2}$/.test(n))
      .sort()
  }

  /**
   * The hashes stored under one first-level directory, with the names that do not belong there
   * (neither a hash in its right place nor a directory of the layout), which cleanup leaves alone.
   */
  async listUnder(top: string): Promise<{ hashes: string[]; strays: string[] }> {
    const hashes: string[] = []
    const strays: string[] = []
    const topPath = join(this.root, top)
    let seconds: string[]
    try {
      seconds = await readdir(topPath)
    } catch {
      return { hashes, strays }
    }
    for (const second of seconds) {
      if (!/^[0-9a-f]{2}$/.test(second)) {
        strays.push(join(topPath, second))
        continue
      }
      let names: string[]
      try {
        names = await readdir(join(topPath, second))
      } catch {
        continue
      }
      for (const name of names) {
        if (SHA256_HEX.test(name) && name.startsWith(top + second)) hashes.push(name)
        else strays.push(join(topPath, second, name))
      }
    }
    return { hashes, strays }
  }

  /** Free bytes for unprivileged writers on the blob file system. */
  freeBytes(): number | null {
    try {
      const s = statfsSync(this.root)
      return Number(s.bavail) * Number(s.bsize)
    } catch {
      return null
    }
  }

  /** Creates the directories if missing (a data directory restored without its blobs). */
  ensureDirs(): void {
    mkdirSync(this.root, { recursive: true, mode: 0o700 })
    mkdirSync(this.tmpDir, { recursive: true, mode: 0o700 })
  }
}

/** Bytes read per step when hashing a written file: one buffer per upload, reused throughout. */
const HASH_READ_BYTES = 1024 * 1024

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
