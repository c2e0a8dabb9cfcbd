/**
 * The attachment cipher of docs/protocol.md §14.5 on the browser's own WebCrypto: the segment key by
 * HKDF-SHA256 (`deriveKey`, so the key is a non-extractable CryptoKey), every 64 KiB segment by one
 * AES-256-GCM call. The layout comes from src/crypto/blob-layout.ts, the same as the client's and the
 * CLI's; only the SHA-256 of the upload is @noble's, as WebCrypto cannot hash a stream a part at a time.
 *
 * A file is read a block of segments at a time, the segments of a block encrypted concurrently, and
 * the ciphertext gathered into a Blob (browser blob storage, not the JS heap), hashed on its way there.
 * One pass: the request's signature needs the hash before the body leaves, and the browser sends a
 * request body only whole (XMLHttpRequest takes a Blob; fetch streams a body only over HTTP/2), so the
 * ciphertext has to exist whole before the upload either way — in blob storage, where a second
 * encryption pass would only write the same bytes again.
 */
import { sha256 } from '@noble/hashes/sha2.js'
import { blobHeader, CIPHER_SEGMENT_BYTES, cutAtSegmentBoundary, decryptedBlobSize, encryptedBlobSize, endsInsideSegment, headerSalt, segmentCount, segmentFails, segmentNonce, shorterThanHeader } from '../../crypto/blob-layout.ts'
import { BLOB_HEADER_BYTES, BLOB_KEY_INFO, BLOB_SALT_BYTES, BLOB_SEGMENT_BYTES, BLOB_TAG_BYTES, DEK_BYTES } from '../../crypto/constants.ts'
import { blobBlocks, BlobParts } from './blob-io.ts'

/** Segments read and sent to WebCrypto together: 1 MiB of plaintext per read. */
const SEGMENTS_PER_BLOCK = 16

/** The blob's AES-256-GCM key: HKDF-SHA256(salt, DEK, "agent-relay e2e attachment v1", 32). */
async function segmentKey(dek: Uint8Array, salt: Uint8Array<ArrayBuffer>): Promise<CryptoKey> {
  if (dek.length !== DEK_BYTES) throw new Error('a data-encryption key is 32 bytes')
  const ikm = await crypto.subtle.importKey('raw', dek as Uint8Array<ArrayBuffer>, 'HKDF', false, ['deriveKey'])
  return crypto.subtle.deriveKey({ name: 'HKDF', hash: 'SHA-256', salt, info: BLOB_KEY_INFO as Uint8Array<ArrayBuffer> }, ikm, { name: 'AES-GCM', length: 256 }, false, ['encrypt', 'decrypt'])
}

const gcm = (index: number, last: boolean) => ({ name: 'AES-GCM', iv: segmentNonce(index, last) })

/** Segment `index` opened, or null when its tag does not verify. */
async function openSegment(key: CryptoKey, index: number, last: boolean, sealed: Uint8Array<ArrayBuffer>): Promise<Uint8Array<ArrayBuffer> | null> {
  try {
    return new Uint8Array(await crypto.subtle.decrypt(gcm(index, last), key, sealed))
  } catch {
    return null
  }
}

/** An attachment encrypted for upload: the stored bytes, their SHA-256 (what the upload signs) and size. */
export interface SealedFile {
  body: Blob
  sha256: Uint8Array
  size: number
}

/** Encrypts `file` under `dek` with a fresh salt; `progress` gets the plaintext bytes done so far. */
export async function sealFile(dek: Uint8Array, file: Blob, progress?: (plainBytes: number) => void): Promise<SealedFile> {
  const salt = crypto.getRandomValues(new Uint8Array(BLOB_SALT_BYTES))
  const key = await segmentKey(dek, salt)
  const header = blobHeader(salt)
  const hash = sha256.create().update(header)
  const out = new BlobParts()
  out.push(header)
  const count = segmentCount(file.size)
  let done = 0
  const keep = (sealed: ArrayBuffer[]) => {
    for (const s of sealed) {
      const bytes = new Uint8Array(s)
      hash.update(bytes)
      out.push(bytes)
      done += bytes.length - BLOB_TAG_BYTES
    }
    progress?.(done)
  }
  let index = 0
  // a block is hashed and kept while the next one is read and encrypted (both off the page's thread)
  let previous: Promise<ArrayBuffer[]> | null = null
  for await (const block of blobBlocks(file, SEGMENTS_PER_BLOCK * BLOB_SEGMENT_BYTES)) {
    const first = index
    const inBlock = segmentCount(block.length)
    const sealing = Promise.all(
      Array.from({ length: inBlock }, (_, k) => crypto.subtle.encrypt(gcm(first + k, first + k === count - 1), key, block.subarray(k * BLOB_SEGMENT_BYTES, (k + 1) * BLOB_SEGMENT_BYTES))),
    )
    sealing.catch(() => {}) // awaited below, after the block before it
    if (previous) keep(await previous)
    previous = sealing
    index += inBlock
  }
  keep(await previous!)
  const body = out.blob()
  if (index !== count || body.size !== encryptedBlobSize(file.size)) throw new Error('the file changed while it was being encrypted')
  return { body, sha256: hash.digest(), size: body.size }
}

/**
 * The plaintext of a stored attachment as a Blob, each segment authenticated before it is kept;
 * rejects with DecryptError (changed bytes, wrong key, cut short, unknown format).
 */
export async function openFile(dek: Uint8Array, stored: Blob): Promise<Blob> {
  if (stored.size < BLOB_HEADER_BYTES) throw shorterThanHeader()
  const salt = headerSalt(new Uint8Array(await stored.slice(0, BLOB_HEADER_BYTES).arrayBuffer()))
  const plainSize = decryptedBlobSize(stored.size)
  if (plainSize === null) throw endsInsideSegment()
  const key = await segmentKey(dek, salt)
  const count = segmentCount(plainSize)
  const out = new BlobParts()
  let index = 0
  for await (const block of blobBlocks(stored.slice(BLOB_HEADER_BYTES), SEGMENTS_PER_BLOCK * CIPHER_SEGMENT_BYTES)) {
    const first = index
    const segments = Array.from({ length: Math.ceil(block.length / CIPHER_SEGMENT_BYTES) }, (_, k) => block.subarray(k * CIPHER_SEGMENT_BYTES, (k + 1) * CIPHER_SEGMENT_BYTES))
    const opened = await Promise.all(segments.map((s, k) => openSegment(key, first + k, first + k === count - 1, s)))
    for (const [k, plain] of opened.entries()) {
      if (plain) {
        out.push(plain)
        continue
      }
      const i = first + k
      // the last one opens as an inner segment: the attachment was cut after a whole segment
      const cut = i === count - 1 && segments[k]!.length === CIPHER_SEGMENT_BYTES && (await openSegment(key, i, false, segments[k]!))
      throw cut ? cutAtSegmentBoundary() : segmentFails(i)
    }
    index += segments.length
  }
  return out.blob()
}
