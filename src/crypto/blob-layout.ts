/**
 * The byte layout of an encrypted attachment (docs/protocol.md §14.5), apart from any cipher: sizes,
 * segment nonces, the header and the failures a reader reports. blob.ts runs the cipher on the
 * synchronous primitives; the console runs it on WebCrypto (src/console/app/attachment-cipher.ts).
 */
import { BLOB_FORMAT_AES256GCM_64K, BLOB_HEADER_BYTES, BLOB_SEGMENT_BYTES, BLOB_TAG_BYTES } from './constants.ts'
import { DecryptError } from './errors.ts'

/** A segment as stored: its plaintext (64 KiB except the last) and its tag. */
export const CIPHER_SEGMENT_BYTES = BLOB_SEGMENT_BYTES + BLOB_TAG_BYTES

/** The number of segments of a plaintext of `plainBytes` (an empty one is one empty segment). */
export function segmentCount(plainBytes: number): number {
  return Math.max(1, Math.ceil(plainBytes / BLOB_SEGMENT_BYTES))
}

/** The size of the stored (encrypted) blob for a plaintext of `plainBytes`. */
export function encryptedBlobSize(plainBytes: number): number {
  return BLOB_HEADER_BYTES + plainBytes + segmentCount(plainBytes) * BLOB_TAG_BYTES
}

/** The plaintext size of a stored blob of `cipherBytes`, or null when no plaintext encrypts to that size. */
export function decryptedBlobSize(cipherBytes: number): number | null {
  const body = cipherBytes - BLOB_HEADER_BYTES
  if (body < BLOB_TAG_BYTES) return null
  const plain = body - Math.ceil(body / CIPHER_SEGMENT_BYTES) * BLOB_TAG_BYTES
  return plain >= 0 && encryptedBlobSize(plain) === cipherBytes ? plain : null
}

/** Segment `index`'s nonce: the index as 11 bytes big-endian, then 1 for the last segment, else 0. */
export function segmentNonce(index: number, last: boolean): Uint8Array<ArrayBuffer> {
  const nonce = new Uint8Array(12)
  let v = index
  for (let i = 10; i >= 0 && v > 0; i--) {
    nonce[i] = v % 256
    v = Math.floor(v / 256)
  }
  nonce[11] = last ? 1 : 0
  return nonce
}

/** The header of a new blob: the format byte and `salt`. */
export function blobHeader(salt: Uint8Array): Uint8Array<ArrayBuffer> {
  const header = new Uint8Array(BLOB_HEADER_BYTES)
  header[0] = BLOB_FORMAT_AES256GCM_64K
  header.set(salt, 1)
  return header
}

/** The salt of a stored header; DecryptError when the format is not this one. */
export function headerSalt(header: Uint8Array): Uint8Array<ArrayBuffer> {
  if (header[0] !== BLOB_FORMAT_AES256GCM_64K) throw new DecryptError('unsupported_version', `attachment format ${header[0]} is not supported`)
  return header.slice(1, BLOB_HEADER_BYTES)
}

export const shorterThanHeader = () => new DecryptError('truncated', 'the attachment is shorter than its header')
export const endsInsideSegment = () => new DecryptError('truncated', 'the attachment ends inside a segment')
export const cutAtSegmentBoundary = () => new DecryptError('truncated', 'the attachment was cut short at a segment boundary')
export const segmentFails = (index: number) => new DecryptError('authentication_failed', `attachment segment ${index} does not authenticate: wrong key or changed bytes`)
