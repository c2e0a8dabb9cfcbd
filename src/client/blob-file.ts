/**
 * Writing a downloaded blob to a file without ever leaving a wrong one behind: the bytes go to a
 * temporary file beside the target, are hashed on the way, and the file is renamed into place only
 * when the SHA-256 matches what the relay announced. Memory stays flat whatever the size.
 */
import { createHash, randomBytes } from 'node:crypto'
import { access, link, open, rename, unlink } from 'node:fs/promises'

export interface DownloadedFile {
  blob_id: string
  /** Where the bytes are now. */
  path: string
  size: number
  content_type: string
  /** SHA-256 hex of the bytes written (checked against the relay's X-M2M-Blob-Hash). */
  sha256: string
}

export async function writeBlobToFile(
  res: Response,
  blobId: string,
  path: string,
  opts: { overwrite?: boolean; onProgress?: (receivedBytes: number) => void } = {},
): Promise<DownloadedFile> {
  const expected = res.headers.get('x-m2m-blob-hash')
  const contentType = res.headers.get('content-type') ?? 'application/octet-stream'
  const temp = `${path}.part-${randomBytes(4).toString('hex')}`
  const hash = createHash('sha256')
  let size = 0
  const file = await open(temp, 'wx', 0o644)
  try {
    if (res.body) {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        hash.update(chunk)
        let view = chunk
        while (view.byteLength) view = view.subarray((await file.write(view)).bytesWritten)
        size += chunk.byteLength
        opts.onProgress?.(size)
      }
    }
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
    await file.close().catch(() => {})
    await unlink(temp).catch(() => {})
    throw err
  }
}

const exists = (path: string) => access(path).then(() => true, () => false)
