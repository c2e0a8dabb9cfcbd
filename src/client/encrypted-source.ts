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
import { collectionHints } from './garbage.ts'

/**
 * Plaintext read per step, in whole segments: 1 MiB while hashing (into two reused read buffers), 256 KiB
 * while sending. The client's peak memory grows with the chunk size of the request body (measured
 * before chunks were reused: about +20 MiB at 256 KiB, +30 MiB at 1 MiB, +55 MiB at 2 MiB for 100 MiB)
 * while the throughput hardly changes above 256 KiB.
 */
const HASH_BLOCK_BYTES = 16 * BLOB_SEGMENT_BYTES
const SEND_BLOCK_BYTES = 4 * BLOB_SEGMENT_BYTES

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
    const bytes = Math.min(HASH_BLOCK_BYTES, Math.max(1, stat.size))
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
 * The source in blocks of `blockBytes` (the last one shorter; one empty block for an empty source),
 * each valid until the one after next is asked for: the next block is read while this one is sealed.
 */
async function* plainBlocks(source: ReReadable, expectSize: number, blockBytes: number): AsyncGenerator<Uint8Array> {
  const reader = await openReader(source)
  let ahead: Promise<Uint8Array> | null = null
  try {
    const size = reader.size
    if (size !== expectSize) throw new Error('the upload source changed size while it was being encrypted')
    const readBlock = (from: number, slot: 0 | 1) => {
      const n = Math.min(blockBytes, size - from)
      const read = n > 0 ? reader.read(from, n, slot) : Promise.resolve(new Uint8Array(0))
      // its failure surfaces where it is awaited, or not at all when the upload stopped before
      read.catch(() => {})
      return read
    }
    ahead = readBlock(0, 0)
    for (let at = 0, slot: 0 | 1 = 0; ; slot = slot ? 0 : 1) {
      const block = await ahead
      at += block.length
      ahead = at < size ? readBlock(at, slot ? 0 : 1) : null
      yield block
      if (!ahead) return
    }
  } finally {
    await ahead?.catch(() => {})
    await reader.close()
  }
}

/**
 * SHA-256 of the encrypted blob, and its size. Each segment's ciphertext and tag go into the hash as the
 * cipher hands them out: nothing is copied or kept.
 */
async function hashEncrypted(sealer: BlobSealer, source: ReReadable, plainSize: number): Promise<{ digest: Buffer; size: number }> {
  const hash = createHash('sha256')
  hash.update(sealer.header)
  let size = sealer.header.length
  const count = Math.max(1, Math.ceil(plainSize / BLOB_SEGMENT_BYTES))
  let index = 0
  // the cipher's output for each segment is garbage once hashed
  const meter = collectionHints()
  for await (const block of plainBlocks(source, plainSize, HASH_BLOCK_BYTES)) {
    meter(block.length)
    const inBlock = Math.max(1, Math.ceil(block.length / BLOB_SEGMENT_BYTES))
    for (let k = 0; k < inBlock; k++, index++) {
      const [ciphertext, tag] = sealer.sealDetached(index, index === count - 1, block.subarray(k * BLOB_SEGMENT_BYTES, (k + 1) * BLOB_SEGMENT_BYTES))
      hash.update(ciphertext)
      hash.update(tag)
      size += ciphertext.length + tag.length
    }
  }
  if (index !== count) throw new Error('the upload source changed while it was being encrypted')
  return { digest: hash.digest(), size }
}

/**
 * The encrypted blob in chunks of one block of plaintext each (the first chunk starts with the header):
 * in Bun each chunk is valid until three more were asked for, elsewhere each is new memory.
 */
async function* encryptedChunks(sealer: BlobSealer, source: ReReadable, plainSize: number): AsyncGenerator<Uint8Array> {
  const count = Math.max(1, Math.ceil(plainSize / BLOB_SEGMENT_BYTES))
  let index = 0
  const ring = REUSE_SENT_CHUNKS ? new ChunkRing(BLOB_HEADER_BYTES + SEND_BLOCK_BYTES + (SEND_BLOCK_BYTES / BLOB_SEGMENT_BYTES) * BLOB_TAG_BYTES) : null
  // the cipher's output for each segment is garbage once copied into the chunk (and the chunk once sent, without the ring)
  const meter = collectionHints()
  for await (const block of plainBlocks(source, plainSize, SEND_BLOCK_BYTES)) {
    meter(block.length)
    const head = index === 0 ? BLOB_HEADER_BYTES : 0
    const inBlock = Math.max(1, Math.ceil(block.length / BLOB_SEGMENT_BYTES))
    const length = head + block.length + inBlock * BLOB_TAG_BYTES
    const chunk = ring ? ring.next(length) : allocate(length)
    if (head) chunk.set(sealer.header, 0)
    for (let k = 0, out = head; k < inBlock; k++, index++) {
      const plain = block.subarray(k * BLOB_SEGMENT_BYTES, (k + 1) * BLOB_SEGMENT_BYTES)
      sealer.seal(index, index === count - 1, plain, chunk.subarray(out, (out += plain.length + BLOB_TAG_BYTES)))
    }
    yield chunk
  }
  if (index !== count) throw new Error('the upload source changed while it was being encrypted')
}

/**
 * Bun's fetch is done with a chunk of a streamed request body by the time it asks for the next one
 * (test/client/encrypted-upload-body.test.ts holds it to that with a server that reads slowly, and
 * fails when a chunk is changed any earlier). So the chunks of an upload take turns in four buffers
 * instead of being new memory each: 100 MiB less garbage per 100 MiB sent. Node's fetch may hold a
 * chunk until its socket has taken it: there, every chunk is new.
 */
const REUSE_SENT_CHUNKS = typeof (globalThis as { Bun?: unknown }).Bun !== 'undefined'

/** A few buffers used in turn; a buffer comes back after `count - 1` others were handed out. */
class ChunkRing {
  private readonly buffers: Uint8Array[] = []
  private at = 0
  constructor(private readonly bytes: number, private readonly count = 4) {}
  next(length: number): Uint8Array {
    let b = this.buffers[this.at]
    if (!b) this.buffers[this.at] = b = allocate(this.bytes)
    this.at = (this.at + 1) % this.count
    return b.subarray(0, length)
  }
}

/** Memory every byte of which is written before it is read: not zeroed first where the runtime allows. */
const allocate = (bytes: number): Uint8Array => (typeof Buffer === 'function' ? Buffer.allocUnsafe(bytes) : new Uint8Array(bytes))

/**
 * The upload, ready to sign: encrypts the source once to hash the ciphertext (plaintext size counted on
 * the way), then `body()` encrypts it again as a stream that reads only as fast as the request sends.
 */
export async function prepareEncryptedUpload(sealer: BlobSealer, source: ReReadable): Promise<PreparedBlob & { plainSize: number }> {
  const reader = await openReader(source)
  const plainSize = reader.size
  await reader.close()
  const { digest, size } = await hashEncrypted(sealer, source, plainSize)
  if (size !== encryptedBlobSize(plainSize)) throw new Error('the upload source changed while it was being encrypted')
  return {
    size,
    plainSize,
    hashBase64Url: digest.toString('base64url'),
    hashHex: digest.toString('hex'),
    body(onProgress) {
      const chunks = encryptedChunks(sealer, source, plainSize)
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
