/** Ed25519 key handling in the encodings of SPEC §1. */
import { decodeBase64Url } from '../lib/base64url.ts'

export const PUBLIC_KEY_PATTERN = /^[A-Za-z0-9_-]{43}$/

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

/** The group order L of Ed25519; RFC 8032 §5.1.7 requires S < L. */
const L = (1n << 252n) + 27742317777372353535851937790883648493n

/** True when the scalar half of the signature is canonical (S < L), as RFC 8032 verifiers demand. */
export function hasCanonicalScalar(signature: Uint8Array): boolean {
  let s = 0n
  for (let i = 63; i >= 32; i--) s = (s << 8n) | BigInt(signature[i])
  return s < L
}
