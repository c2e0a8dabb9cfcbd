/**
 * Files of any size in bounded page memory. A File or Blob is read a block at a time
 * (`slice().arrayBuffer()`, the next block read while this one is worked on), and bytes made here are
 * gathered into Blobs a few MiB at a time: a Blob's bytes go to the browser's blob storage (memory
 * outside the page's heap, or disk), so a 100 MiB upload or download never sits whole in the JS heap.
 */
import { sha256 } from '@noble/hashes/sha2.js'

/**
 * The blob in blocks of `blockBytes` (the last shorter; one empty block for an empty blob). Throws
 * when the blob does not read back at its size (a file changed on disk after it was chosen).
 */
export async function* blobBlocks(blob: Blob, blockBytes: number): AsyncGenerator<Uint8Array<ArrayBuffer>> {
  const size = blob.size
  const read = (at: number) => {
    const block = blob.slice(at, Math.min(size, at + blockBytes)).arrayBuffer()
    // its failure surfaces where it is awaited, or not at all when the reader stopped before
    block.catch(() => {})
    return block
  }
  if (size === 0) {
    yield new Uint8Array(0)
    return
  }
  let ahead: Promise<ArrayBuffer> | null = read(0)
  for (let at = 0; ahead; ) {
    const block = new Uint8Array(await ahead)
    if (block.length !== Math.min(blockBytes, size - at)) throw new Error('the file changed while it was being read')
    at += block.length
    ahead = at < size ? read(at) : null
    yield block
  }
}

/** Bytes gathered into one Blob, handed to the browser's blob storage every `flushBytes`. */
export class BlobParts {
  private readonly blobs: Blob[] = []
  private pending: Uint8Array<ArrayBuffer>[] = []
  private pendingBytes = 0

  constructor(private readonly flushBytes = 4 * 1024 * 1024) {}

  push(part: Uint8Array<ArrayBuffer>): void {
    this.pending.push(part)
    this.pendingBytes += part.length
    if (this.pendingBytes >= this.flushBytes) this.flush()
  }

  private flush(): void {
    if (this.pending.length) this.blobs.push(new Blob(this.pending))
    this.pending = []
    this.pendingBytes = 0
  }

  /** Everything pushed, as one Blob. */
  blob(): Blob {
    this.flush()
    return new Blob(this.blobs)
  }
}

/** Plaintext read per step while hashing a file: large enough that reads cost little, small for the heap. */
const HASH_BLOCK_BYTES = 1024 * 1024

/**
 * SHA-256 of a whole file, read in blocks: @noble/hashes, since WebCrypto's digest takes only a whole
 * buffer at once (`progress` gets the bytes hashed so far).
 */
export async function sha256OfBlob(blob: Blob, progress?: (doneBytes: number) => void): Promise<Uint8Array> {
  const hash = sha256.create()
  let done = 0
  for await (const block of blobBlocks(blob, HASH_BLOCK_BYTES)) {
    hash.update(block)
    progress?.((done += block.length))
  }
  return hash.digest()
}
