/**
 * What the client can upload as a blob, made ready for a signed upload: the SHA-256 must be in the
 * signature before the first byte is sent, so the content is hashed in one pass and sent
 * in a second. Files and Blobs are read twice from their source; a one-shot stream is spooled to a
 * temp file while hashed. Memory stays flat whatever the size.
 */
import { createHash, randomBytes } from 'node:crypto'
import { openAsBlob } from 'node:fs'
import { open, unlink } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/** Bytes in memory, a file path, a Blob (e.g. `Bun.file`) or a one-shot stream. */
export type BlobSource = Uint8Array | ArrayBuffer | string | Blob | ReadableStream<Uint8Array>

export interface PreparedBlob {
  /**
   * The bytes, from the start, for one request: a Blob (backed by memory or a file), or a fresh stream
   * that calls `onProgress` with the bytes it has handed over.
   */
  body(onProgress?: (sentBytes: number) => void): Blob | ReadableStream<Uint8Array>
  size: number
  /** SHA-256, unpadded base64url: the BODY_HASH to sign. */
  hashBase64Url: string
  /** SHA-256, lowercase hex: what the relay will report as `hash`. */
  hashHex: string
  /** From a Blob's own type, when it has one. */
  contentType?: string
  /** Removes the spool file of a stream; a no-op otherwise. */
  cleanup(): Promise<void>
}

export async function prepareBlobSource(source: BlobSource): Promise<PreparedBlob> {
  if (source instanceof ReadableStream) return spool(source)
  let blob: Blob
  if (typeof source === 'string') blob = await openAsBlob(source)
  else if (source instanceof Blob) blob = source
  else blob = new Blob([source instanceof ArrayBuffer ? new Uint8Array(source) : (source as Uint8Array<ArrayBuffer>)])
  const hash = createHash('sha256')
  for await (const chunk of blob.stream() as unknown as AsyncIterable<Uint8Array>) hash.update(chunk)
  const digest = hash.digest()
  const type = blob.type && typeof source !== 'string' ? blob.type : undefined
  return { body: () => blob, size: blob.size, hashBase64Url: digest.toString('base64url'), hashHex: digest.toString('hex'), contentType: type, cleanup: async () => {} }
}

async function spool(stream: ReadableStream<Uint8Array>): Promise<PreparedBlob> {
  const path = join(tmpdir(), `relay-upload-${randomBytes(8).toString('hex')}`)
  const hash = createHash('sha256')
  const file = await open(path, 'wx', 0o600)
  try {
    for await (const chunk of stream as unknown as AsyncIterable<Uint8Array>) {
      hash.update(chunk)
      let view = chunk
      while (view.byteLength) {
        const { bytesWritten } = await file.write(view)
        view = view.subarray(bytesWritten)
      }
    }
  } catch (err) {
    await file.close()
    await unlink(path).catch(() => {})
    throw err
  }
  await file.close()
  const blob = await openAsBlob(path)
  const digest = hash.digest()
  return {
    body: () => blob,
    size: blob.size,
    hashBase64Url: digest.toString('base64url'),
    hashHex: digest.toString('hex'),
    cleanup: () => unlink(path).catch(() => {}),
  }
}
