/**
 * Attachment bytes under a data-encryption key (DEK), in constant memory whatever the size: a STREAM
 * construction (Hoang, Reyhanitabar, Rogaway, Vizár 2015), laid out as age lays out its payload.
 *
 *   header   = 0x01 (this format) ‖ salt (16 random bytes)
 *   key      = HKDF-SHA256(salt, DEK, "agent-relay e2e attachment v1", 32)
 *   segments = AES-256-GCM(key, nonce_i, plaintext_i), plaintext_i 64 KiB except the last (0–64 KiB;
 *              empty only when the whole plaintext is), nonce_i = i as 11 bytes big-endian ‖ last flag
 *
 * Dropping, reordering, duplicating or truncating segments fails authentication; so does cutting the
 * stream at a segment boundary (the last segment's flag). AES-256-GCM because it is native in Bun, Node
 * and every browser's WebCrypto, where ChaCha20-Poly1305 is not (docs/protocol.md explains the figures).
 */
import { BLOB_HEADER_BYTES, BLOB_KEY_INFO, BLOB_SALT_BYTES, BLOB_SEGMENT_BYTES, BLOB_TAG_BYTES, DEK_BYTES } from './constants.ts'
import { blobHeader, CIPHER_SEGMENT_BYTES, cutAtSegmentBoundary, decryptedBlobSize, encryptedBlobSize, endsInsideSegment, headerSalt, segmentFails, segmentNonce, shorterThanHeader } from './blob-layout.ts'
import { concatBytes } from './bytes.ts'
import { DecryptError } from './errors.ts'
import { hkdfExpand, hkdfExtract } from './hkdf.ts'
import type { CryptoPrimitives } from './primitives.ts'

export { decryptedBlobSize, encryptedBlobSize }

function payloadKey(p: CryptoPrimitives, dek: Uint8Array, salt: Uint8Array): Uint8Array {
  if (dek.length !== DEK_BYTES) throw new Error('a data-encryption key is 32 bytes')
  return hkdfExpand(p, hkdfExtract(p, salt, dek), BLOB_KEY_INFO, 32)
}

const EMPTY = new Uint8Array(0)

/** Chunks in, exact-size slices out, without copying everything on every push. */
class ByteQueue {
  private chunks: Uint8Array[] = []
  private head = 0
  length = 0

  push(chunk: Uint8Array): void {
    if (chunk.length === 0) return
    this.chunks.push(chunk)
    this.length += chunk.length
  }

  /** The next `n` bytes: a view when they lie in one chunk, else copied into `into` (when given) or new memory. */
  take(n: number, into?: Uint8Array): Uint8Array {
    const first = this.chunks[0]
    if (first && first.length - this.head >= n) {
      const out = first.subarray(this.head, this.head + n)
      this.head += n
      if (this.head === first.length) {
        this.chunks.shift()
        this.head = 0
      }
      this.length -= n
      return out
    }
    const out = into && into.length >= n ? into.subarray(0, n) : new Uint8Array(n)
    let at = 0
    while (at < n) {
      const c = this.chunks[0]!
      const part = Math.min(c.length - this.head, n - at)
      out.set(c.subarray(this.head, this.head + part), at)
      at += part
      this.head += part
      if (this.head === c.length) {
        this.chunks.shift()
        this.head = 0
      }
    }
    this.length -= n
    return out
  }
}

/**
 * The segment cipher of one blob with its salt fixed: segment i of a plaintext always seals to the same
 * bytes, so a sender can encrypt a file once to learn the ciphertext's hash and again to send it, keeping
 * neither copy.
 */
export class BlobSealer {
  /** The blob's first BLOB_HEADER_BYTES: format and salt. */
  readonly header: Uint8Array
  private readonly key: Uint8Array

  constructor(
    private readonly p: CryptoPrimitives,
    dek: Uint8Array,
    salt: Uint8Array = p.randomBytes(BLOB_SALT_BYTES),
  ) {
    if (salt.length !== BLOB_SALT_BYTES) throw new Error(`the attachment salt is ${BLOB_SALT_BYTES} bytes`)
    this.key = payloadKey(p, dek, salt)
    this.header = blobHeader(salt)
  }

  /**
   * Segment `index` (BLOB_SEGMENT_BYTES of plaintext, or 0–BLOB_SEGMENT_BYTES when `last`), tag
   * appended; into `output` (plaintext.length + BLOB_TAG_BYTES) when given.
   */
  seal(index: number, last: boolean, plaintext: Uint8Array, output?: Uint8Array): Uint8Array {
    assertSegment(plaintext, last)
    return this.p.aes256gcmSeal(this.key, segmentNonce(index, last), plaintext, EMPTY, output)
  }

  /** The same segment as its ciphertext and its tag, apart and uncopied where the primitives allow it. */
  sealDetached(index: number, last: boolean, plaintext: Uint8Array): [ciphertext: Uint8Array, tag: Uint8Array] {
    if (!this.p.aes256gcmSealDetached) {
      const sealed = this.seal(index, last, plaintext)
      return [sealed.subarray(0, plaintext.length), sealed.subarray(plaintext.length)]
    }
    assertSegment(plaintext, last)
    return this.p.aes256gcmSealDetached(this.key, segmentNonce(index, last), plaintext, EMPTY)
  }
}

/** A segment is BLOB_SEGMENT_BYTES of plaintext; only the last may be shorter. */
function assertSegment(plaintext: Uint8Array, last: boolean): void {
  if (plaintext.length > BLOB_SEGMENT_BYTES || (!last && plaintext.length !== BLOB_SEGMENT_BYTES)) throw new Error('a segment is 64 KiB of plaintext, except the last')
}

/**
 * Ciphertext chunks of any size in, plaintext segments out, each only once it authenticated. `push`
 * and `finish` throw DecryptError on any change, cut or wrong key.
 */
export class BlobOpener {
  private readonly queue = new ByteQueue()
  private key: Uint8Array | null = null
  private index = 0
  // a segment that spans two chunks is gathered here: opening never returns a view of its input
  private readonly gather = new Uint8Array(CIPHER_SEGMENT_BYTES)

  constructor(
    private readonly p: CryptoPrimitives,
    private readonly dek: Uint8Array,
  ) {}

  private readHeader(): void {
    this.key = payloadKey(this.p, this.dek, headerSalt(this.queue.take(BLOB_HEADER_BYTES)))
  }

  /** The plaintext segments `chunk` completes (a segment is held back until more bytes show it is not the last). */
  push(chunk: Uint8Array, out: Uint8Array[] = []): Uint8Array[] {
    const queue = this.queue
    queue.push(chunk)
    if (!this.key && queue.length >= BLOB_HEADER_BYTES) this.readHeader()
    while (this.key && queue.length > CIPHER_SEGMENT_BYTES) {
      const pt = this.p.aes256gcmOpen(this.key, segmentNonce(this.index, false), queue.take(CIPHER_SEGMENT_BYTES, this.gather), EMPTY)
      if (!pt) throw segmentFails(this.index)
      this.index++
      out.push(pt)
    }
    return out
  }

  /** The last segment, once the ciphertext has ended. */
  finish(): Uint8Array {
    const { p, queue } = this
    if (!this.key) {
      if (queue.length < BLOB_HEADER_BYTES) throw shorterThanHeader()
      this.readHeader()
    }
    const key = this.key!
    const rest = queue.take(queue.length)
    if (rest.length < BLOB_TAG_BYTES) throw endsInsideSegment()
    if (rest.length === BLOB_TAG_BYTES && this.index > 0) throw new DecryptError('truncated', 'an empty last segment after full ones')
    const pt = p.aes256gcmOpen(key, segmentNonce(this.index, true), rest, EMPTY)
    if (!pt) {
      const cut = rest.length === CIPHER_SEGMENT_BYTES && p.aes256gcmOpen(key, segmentNonce(this.index, false), rest, EMPTY)
      throw cut ? cutAtSegmentBoundary() : segmentFails(this.index)
    }
    return pt
  }
}

/** A TransformStream that encrypts plaintext chunks into the stored format. */
export function createBlobEncryptor(p: CryptoPrimitives, dek: Uint8Array): TransformStream<Uint8Array, Uint8Array> {
  const sealer = new BlobSealer(p, dek)
  const queue = new ByteQueue()
  let index = 0
  return new TransformStream<Uint8Array, Uint8Array>({
    start(controller) {
      controller.enqueue(sealer.header)
    },
    transform(chunk, controller) {
      queue.push(chunk)
      // a segment goes out once more bytes follow it, so the last one is known to be last
      while (queue.length > BLOB_SEGMENT_BYTES) controller.enqueue(sealer.seal(index++, false, queue.take(BLOB_SEGMENT_BYTES)))
    },
    flush(controller) {
      controller.enqueue(sealer.seal(index, true, queue.take(queue.length)))
    },
  })
}

/** A TransformStream that decrypts the stored format; errors with DecryptError on any change. */
export function createBlobDecryptor(p: CryptoPrimitives, dek: Uint8Array): TransformStream<Uint8Array, Uint8Array> {
  const opener = new BlobOpener(p, dek)
  return new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      for (const pt of opener.push(chunk)) controller.enqueue(pt)
    },
    flush(controller) {
      controller.enqueue(opener.finish())
    },
  })
}

export function encryptBlobStream(p: CryptoPrimitives, dek: Uint8Array, source: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
  return source.pipeThrough(createBlobEncryptor(p, dek))
}

export function decryptBlobStream(p: CryptoPrimitives, dek: Uint8Array, source: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
  return source.pipeThrough(createBlobDecryptor(p, dek))
}

/** Whole-buffer helpers for small attachments and tests. */
export async function encryptBlob(p: CryptoPrimitives, dek: Uint8Array, plaintext: Uint8Array): Promise<Uint8Array> {
  return collect(encryptBlobStream(p, dek, streamOf(plaintext)))
}

export async function decryptBlob(p: CryptoPrimitives, dek: Uint8Array, ciphertext: Uint8Array): Promise<Uint8Array> {
  return collect(decryptBlobStream(p, dek, streamOf(ciphertext)))
}

function streamOf(bytes: Uint8Array): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(c) {
      if (bytes.length) c.enqueue(bytes)
      c.close()
    },
  })
}

async function collect(stream: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = []
  for await (const part of stream as unknown as AsyncIterable<Uint8Array>) parts.push(part)
  return concatBytes(...parts)
}
