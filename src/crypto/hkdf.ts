/** HKDF-SHA256 (RFC 5869) over the primitives' HMAC. */
import { concatBytes } from './bytes.ts'
import type { CryptoPrimitives } from './primitives.ts'

export function hkdfExtract(p: CryptoPrimitives, salt: Uint8Array, ikm: Uint8Array): Uint8Array {
  return p.hmacSha256(salt.length ? salt : new Uint8Array(32), ikm)
}

export function hkdfExpand(p: CryptoPrimitives, prk: Uint8Array, info: Uint8Array, length: number): Uint8Array {
  if (length > 255 * 32) throw new Error('HKDF-SHA256 output is at most 8160 bytes')
  const out = new Uint8Array(length)
  let t: Uint8Array = new Uint8Array(0)
  for (let i = 1, at = 0; at < length; i++) {
    t = p.hmacSha256(prk, concatBytes(t, info, Uint8Array.of(i)))
    out.set(t.subarray(0, Math.min(t.length, length - at)), at)
    at += t.length
  }
  return out
}
