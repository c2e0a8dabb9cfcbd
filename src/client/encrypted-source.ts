/**
 * An encrypted upload of something that can be read twice (a file path, a Blob, bytes) without a copy
 * of it anywhere: the request signature covers the SHA-256 of the body, so the body must be hashed
 * before it is sent. The segment cipher is deterministic once its key and salt are chosen, so the
 * source is encrypted once into SHA-256 alone (nothing kept) and again while the request body streams
 * out. No temporary file, and memory stays at a few read blocks whatever the size.
 */
import { createHash } from 'node:crypto'
import { open, type FileHandle } from 'node:fs/promises'
import { BLOB_HEADER_BYTES, BLOB_SEGMENT_BYTES, BLOB_TAG_BYTES } from '../crypto/constants.ts'
import { encryptedBlobSize, type BlobSealer } from '../crypto/blob.ts'
import type { PreparedBlob } from './blob-source.ts'

/**
 * Plaintext read per step, in whole segments: 1 MiB while hashing (into one reused buffer), 256 KiB
 * while sending — each chunk of a request body is new memory, and the client's peak memory grows with
 * the chunk size (measured: about +20 MiB at 256 KiB, +30 MiB at 1 MiB, +55 MiB at 2 MiB for 100 MiB)
 * while the throughput hardly changes above 256 KiB.
 */
const HASH_BLOCK_SEGMENTS = 16
const SEND_BLOCK_SEGMENTS = 4
const BLOCK_BYTES = HASH_BLOCK_SEGMENTS * BLOB_SEGMENT_BYTES

/** A source the client can read twice. */
export type ReReadable = string | Blob | Uint8Array | ArrayBuffer

interface PlainReader {
  size: number
  /**
   * Exactly `length` bytes at `at`. Reads into one of two buffers (`slot` 0 or 1): a result is valid
   * until the next read into the same slot, so the next block can be read while this one is encrypted.
   */
  read(at: number, length: number, slot: 0 | 1): Promise<Uint8Array>
  close(): Promise<void>
}

async function fileReader(path: string): Promise<PlainReader> {
  const handle: FileHandle = await open(path, 'r')
  try {
    const stat = await handle.stat()
    if (!stat.isFile()) throw new Error(`${path} is not a regular file`)
    const bytes = Math.min(BLOCK_BYTES, Math.max(1, stat.size))
    const buffers = [new Uint8Array(bytes), new Uint8Array(bytes)] as const
    return {
      size: stat.size,
      async read(at, length, slot) {
        const buffer = buffers[slot]
        let got = 0
        while (got < length) {
          const { bytesRead } = await handle.read(buffer, got, length - got, at + got)
          if (bytesRead === 0) throw new Error(`${path} got shorter while it was being encrypted`)
          got += bytesRead
        }
        return buffer.subarray(0, length)
      },
      close: () => handle.close(),
    }
  } catch (err) {
    await handle.close()
    throw err
  }
}

function blobReader(blob: Blob): PlainReader {
  return {
    size: blob.size,
    async read(at, length) {
      const bytes = new Uint8Array(await blob.slice(at, at + length).arrayBuffer())
      if (bytes.length !== length) throw new Error('the upload source changed while it was being encrypted')
      return bytes
    },
    close: async () => {},
  }
}

function bytesReader(bytes: Uint8Array): PlainReader {
  return { size: bytes.length, read: async (at, length) => bytes.subarray(at, at + length), close: async () => {} }
}

function openReader(source: ReReadable): Promise<PlainReader> | PlainReader {
  if (typeof source === 'string') return fileReader(source)
  if (source instanceof Blob) return blobReader(source)
  return bytesReader(source instanceof ArrayBuffer ? new Uint8Array(source) : source)
}

/**
 * The encrypted blob in chunks of one block of plaintext each (the first chunk starts with the
 * header). With `scratch`, every chunk is
 * written over the same memory (for hashing, where nothing is kept); otherwise each chunk is new.
 */
async function* encryptedChunks(sealer: BlobSealer, source: ReReadable, expectSize: number, scratch: boolean): AsyncGenerator<Uint8Array> {
  const blockSegments = scratch ? HASH_BLOCK_SEGMENTS : SEND_BLOCK_SEGMENTS
  const blockBytes = blockSegments * BLOB_SEGMENT_BYTES
  const reader = await openReader(source)
  let ahead: Promise<Uint8Array> | null = null
  try {
    const size = reader.size
    if (size !== expectSize) throw new Error('the upload source changed size while it was being encrypted')
    const count = Math.max(1, Math.ceil(size / BLOB_SEGMENT_BYTES))
    const reused = scratch ? new Uint8Array(BLOB_HEADER_BYTES + Math.min(blockBytes, size) + Math.min(count, blockSegments) * BLOB_TAG_BYTES) : null
    const readBlock = (from: number, slot: 0 | 1) => {
      const n = Math.min(blockBytes, size - from)
      const read = n > 0 ? reader.read(from, n, slot) : Promise.resolve(new Uint8Array(0))
      // its failure surfaces where it is awaited, or not at all when the upload stopped before
      read.catch(() => {})
      return read
    }
    ahead = readBlock(0, 0)
    for (let at = 0, index = 0, slot: 0 | 1 = 0; index < count; slot = slot ? 0 : 1) {
      const n = Math.min(blockBytes, size - at)
      const block = await ahead
      // the next block is read into the other buffer while this one is sealed
      if (at + n < size) ahead = readBlock(at + n, slot ? 0 : 1)
      const inBlock = Math.max(1, Math.ceil(n / BLOB_SEGMENT_BYTES))
      const head = at === 0 ? BLOB_HEADER_BYTES : 0
      const length = head + n + inBlock * BLOB_TAG_BYTES
      const chunk = reused ? reused.subarray(0, length) : new Uint8Array(length)
      if (head) chunk.set(sealer.header, 0)
      for (let k = 0, out = head; k < inBlock; k++, index++) {
        const plain = block.subarray(k * BLOB_SEGMENT_BYTES, Math.min(n, (k + 1) * BLOB_SEGMENT_BYTES))
        sealer.seal(index, index === count - 1, plain, chunk.subarray(out, (out += plain.length + BLOB_TAG_BYTES)))
      }
      at += n
      yield chunk
    }
  } finally {
    await ahead?.catch(() => {})
    await reader.close()
  }
}

/**
 * The upload, ready to sign: encrypts the source once to hash the ciphertext (plaintext size counted on
 * the way), then `body()` encrypts it again as a stream that reads only as fast as the request sends.
 */
export async function prepareEncryptedUpload(sealer: BlobSealer, source: ReReadable): Promise<PreparedBlob & { plainSize: number }> {
  const hash = createHash('sha256')
  const reader = await openReader(source)
  const plainSize = reader.size
  await reader.close()
  let size = 0
  for await (const chunk of encryptedChunks(sealer, source, plainSize, true)) {
    hash.update(chunk)
    size += chunk.length
  }
  if (size !== encryptedBlobSize(plainSize)) throw new Error('the upload source changed while it was being encrypted')
  const digest = hash.digest()
  return {
    size,
    plainSize,
    hashBase64Url: digest.toString('base64url'),
    hashHex: digest.toString('hex'),
    body(onProgress) {
      const chunks = encryptedChunks(sealer, source, plainSize, false)
      let sent = 0
      return new ReadableStream<Uint8Array>(
        {
          async pull(controller) {
            const next = await chunks.next()
            if (next.done) return controller.close()
            controller.enqueue(next.value)
            sent += next.value.byteLength
            onProgress?.(sent)
          },
          async cancel() {
            await chunks.return(undefined)
          },
        },
        { highWaterMark: 0 },
      )
    },
    cleanup: async () => {},
  }
}
