/** Ed25519 key handling in the encodings of docs/protocol.md §1. */
import { decodeBase64Url } from '../lib/base64url.ts'

/**
 * A public key in its one canonical spelling: 43 unpadded base64url characters whose last character
 * leaves the two unused trailing bits zero (32 bytes are 256 bits; 43 characters carry 258). Without
 * the last rule, four spellings decode to the same key, and a recipient or ACL peer spelled another
 * way would never match the agent it names.
 */
export const PUBLIC_KEY_PATTERN_TEXT = '^[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]$'
export const PUBLIC_KEY_PATTERN = new RegExp(PUBLIC_KEY_PATTERN_TEXT)

/** True when the text is a 43-char unpadded base64url string that decodes to 32 bytes. */
export function isPublicKey(text: unknown): text is string {
  return typeof text === 'string' && PUBLIC_KEY_PATTERN.test(text) && decodeBase64Url(text)?.length === 32
}

export function decodePublicKey(text: string): Uint8Array | null {
  if (!PUBLIC_KEY_PATTERN.test(text)) return null
  const bytes = decodeBase64Url(text)
  return bytes && bytes.length === 32 ? bytes : null
}

export function decodeSignature(text: string): Uint8Array | null {
  if (text.length !== 86) return null
  const bytes = decodeBase64Url(text)
  return bytes && bytes.length === 64 ? bytes : null
}

/** The group order L = 2^252 + 27742317777372353535851937790883648493 of Ed25519, little-endian. */
const L_BYTES = Uint8Array.from(Buffer.from('edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010', 'hex'))

/**
 * True when the scalar half of the signature is canonical (S < L), as RFC 8032 §5.1.7 verifiers
 * demand. Compared byte by byte from the most significant end (little-endian encoding).
 */
export function hasCanonicalScalar(signature: Uint8Array): boolean {
  for (let i = 31; i >= 0; i--) {
    const s = signature[32 + i]
    if (s !== L_BYTES[i]) return s < L_BYTES[i]
  }
  return false // S = L
}

/**
 * Encodings of the eight small-order points of edwards25519 (and their non-canonical twins), top bit of
 * the last byte cleared, as libsodium lists them. A public key or signature R among them lets a forged
 * signature verify for a fraction of messages without any private key, so they are refused.
 */
const SMALL_ORDER: number[][] = [
  new Array(32).fill(0), // 0 (order 4)
  [1, ...new Array(31).fill(0)], // 1 (order 1)
  [0x26, 0xe8, 0x95, 0x8f, 0xc2, 0xb2, 0x27, 0xb0, 0x45, 0xc3, 0xf4, 0x89, 0xf2, 0xef, 0x98, 0xf0,
    0xd5, 0xdf, 0xac, 0x05, 0xd3, 0xc6, 0x33, 0x39, 0xb1, 0x38, 0x02, 0x88, 0x6d, 0x53, 0xfc, 0x05], // order 8
  [0xc7, 0x17, 0x6a, 0x70, 0x3d, 0x4d, 0xd8, 0x4f, 0xba, 0x3c, 0x0b, 0x76, 0x0d, 0x10, 0x67, 0x0f,
    0x2a, 0x20, 0x53, 0xfa, 0x2c, 0x39, 0xcc, 0xc6, 0x4e, 0xc7, 0xfd, 0x77, 0x92, 0xac, 0x03, 0x7a], // order 8
  [0xec, ...new Array(30).fill(0xff), 0x7f], // p - 1 (order 2)
  [0xed, ...new Array(30).fill(0xff), 0x7f], // p, non-canonical 0 (order 4)
  [0xee, ...new Array(30).fill(0xff), 0x7f], // p + 1, non-canonical 1 (order 1)
]

/** True when 32 bytes encode a small-order point (either sign). */
export function isSmallOrderPoint(bytes: Uint8Array): boolean {
  return SMALL_ORDER.some((point) => {
    for (let i = 0; i < 31; i++) if (bytes[i] !== point[i]) return false
    return (bytes[31] & 0x7f) === point[31]
  })
}

/**
 * RFC 8032 §5.1.3: a point encodes y < p = 2^255 − 19. The 19 encodings of y in [p, 2^255) (either
 * sign bit) are non-canonical aliases and must fail to decode.
 */
export function isCanonicalPointEncoding(bytes: Uint8Array): boolean {
  if ((bytes[31] & 0x7f) !== 0x7f) return true
  for (let i = 30; i >= 1; i--) if (bytes[i] !== 0xff) return true
  return bytes[0] < 0xed
}
