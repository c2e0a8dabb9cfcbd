/**
 * Writing a downloaded blob to a file without ever leaving a wrong one behind: the bytes go to a
 * temporary file beside the target, are hashed on the way, and the file is renamed into place only
 * when the SHA-256 matches what the relay announced. Memory stays flat whatever the size.
 */
import { createHash, randomBytes } from 'node:crypto'
import { access, link, open, rename, unlink, type FileHandle } from 'node:fs/promises'
import { memoryBudget } from './garbage.ts'

export interface DownloadedFile {
  blob_id: string
  /** Where the bytes are now. */
  path: string
  size: number
  content_type: string
  /** SHA-256 hex of the bytes written (checked against the relay's X-M2M-Blob-Hash). */
  sha256: string
}

export interface WriteFileOptions {
  overwrite?: boolean
  onProgress?: (receivedBytes: number) => void
}

export async function writeBlobToFile(res: Response, blobId: string, path: string, opts: WriteFileOptions = {}): Promise<DownloadedFile> {
  const contentType = res.headers.get('content-type') ?? 'application/octet-stream'
  return writeBatchesToFile(singles(res.body), { blobId, path, contentType, expected: res.headers.get('x-m2m-blob-hash') }, opts)
}

async function* singles(body: ReadableStream<Uint8Array> | null): AsyncGenerator<Uint8Array[]> {
  if (body) for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) yield [chunk]
}

/**
 * The same for bytes that arrive in batches (e.g. decrypted segments): each batch is hashed and written
 * with one system call. `expected` is the SHA-256 hex the bytes must have, when known.
 */
export async function writeBatchesToFile(
  batches: AsyncIterable<Uint8Array[]>,
  target: { blobId: string; path: string; contentType: string; expected?: string | null },
  opts: WriteFileOptions = {},
): Promise<DownloadedFile> {
  const { blobId, path, contentType, expected } = target
  const temp = `${path}.part-${randomBytes(4).toString('hex')}`
  const hash = createHash('sha256')
  let size = 0
  const file = await open(temp, 'wx', 0o644)
  // one write in flight while the next batch arrives and is hashed, and the written bytes pushed to the
  // disk every few mebibytes meanwhile, so the sync before the rename has little left to do
  let writing: Promise<void> | null = null
  let syncing: Promise<void> | null = null
  let unsynced = 0
  const settle = async () => {
    await writing
    await syncing
  }
  // each chunk of the response (and each decrypted segment) is garbage once written
  const meter = memoryBudget()
  try {
    for await (const batch of batches) {
      let bytes = 0
      for (const chunk of batch) {
        hash.update(chunk)
        bytes += chunk.byteLength
      }
      await writing
      writing = writeBatch(file, batch)
      writing.catch(() => {})
      size += bytes
      unsynced += bytes
      meter(bytes)
      if (unsynced >= SYNC_EVERY_BYTES && !syncing) {
        unsynced = 0
        const sync: Promise<void> = writing.then(() => file.datasync()).finally(() => {
          if (syncing === sync) syncing = null
        })
        syncing = sync
        sync.catch(() => {})
      }
      opts.onProgress?.(size)
    }
    await settle()
    const sha256 = hash.digest('hex')
    if (expected && sha256 !== expected) throw new Error(`download of ${blobId} is corrupt: SHA-256 ${sha256}, expected ${expected}`)
    await file.sync()
    await file.close()
    // link() refuses an existing target, so a file that appeared meanwhile is never replaced silently
    if (opts.overwrite) await rename(temp, path)
    else {
      try {
        await link(temp, path)
        await unlink(temp)
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code
        if (code === 'EEXIST') throw new Error(`${path} already exists (pass overwrite to replace it)`)
        // a file system without hard links: check, then rename
        if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP') throw err
        if (await exists(path)) throw new Error(`${path} already exists (pass overwrite to replace it)`)
        await rename(temp, path)
      }
    }
    return { blob_id: blobId, path, size, content_type: contentType, sha256 }
  } catch (err) {
    await settle().catch(() => {})
    await file.close().catch(() => {})
    await unlink(temp).catch(() => {})
    throw err
  }
}

const SYNC_EVERY_BYTES = 8 * 1024 * 1024

async function writeBatch(file: FileHandle, batch: Uint8Array[]): Promise<void> {
  let written = batch.length === 1 ? (await file.write(batch[0]!)).bytesWritten : (await file.writev(batch)).bytesWritten
  // a short write (rare on a regular file): the rest, chunk by chunk
  for (const chunk of batch) {
    if (written >= chunk.byteLength) {
      written -= chunk.byteLength
      continue
    }
    let view = chunk.subarray(written)
    written = 0
    while (view.byteLength) view = view.subarray((await file.write(view)).bytesWritten)
  }
}

const exists = (path: string) => access(path).then(() => true, () => false)
