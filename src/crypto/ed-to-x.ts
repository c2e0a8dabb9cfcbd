/**
 * Ed25519 identity keys as X25519 keys (the birational map of RFC 7748 §4.1), bit for bit what
 * libsodium's crypto_sign_ed25519_pk_to_curve25519 / crypto_sign_ed25519_sk_to_curve25519 return, so an
 * agent needs no second key pair to receive encrypted messages.
 */
import { ed25519 } from '@noble/curves/ed25519.js'
import { bytesKey } from './bytes.ts'
import type { CryptoPrimitives } from './primitives.ts'

const P = 2n ** 255n - 19n

function mod(a: bigint): bigint {
  const r = a % P
  return r < 0n ? r + P : r
}

function pow(base: bigint, exp: bigint): bigint {
  let result = 1n
  let b = mod(base)
  let e = exp
  while (e > 0n) {
    if (e & 1n) result = (result * b) % P
    b = (b * b) % P
    e >>= 1n
  }
  return result
}

function leToBigint(bytes: Uint8Array): bigint {
  let v = 0n
  for (let i = bytes.length - 1; i >= 0; i--) v = (v << 8n) | BigInt(bytes[i]!)
  return v
}

function bigintToLe32(v: bigint): Uint8Array {
  const out = new Uint8Array(32)
  let x = v
  for (let i = 0; i < 32; i++) {
    out[i] = Number(x & 0xffn)
    x >>= 8n
  }
  return out
}

const converted = new Map<string, Uint8Array>()
const CACHE_LIMIT = 1024 // keys an agent talks to; bounded so a flood of senders cannot grow it

/**
 * The X25519 public key of an Ed25519 public key. Refuses, as libsodium does, encodings that are not a
 * canonical point of the curve and points outside the prime-order subgroup (the small-order points and
 * any point with a torsion component). Results are cached: the subgroup check costs a scalar
 * multiplication.
 */
export function edPublicToX25519(edPublicKey: Uint8Array): Uint8Array {
  if (edPublicKey.length !== 32) throw new Error('an Ed25519 public key is 32 bytes')
  const id = bytesKey(edPublicKey)
  const hit = converted.get(id)
  if (hit) return hit.slice()
  let point
  try {
    point = ed25519.Point.fromBytes(edPublicKey)
  } catch {
    throw new Error('not a canonical point of Ed25519')
  }
  if (point.isSmallOrder() || !point.isTorsionFree()) throw new Error('Ed25519 public key outside the prime-order subgroup')
  const y = leToBigint(edPublicKey) & ((1n << 255n) - 1n)
  // u = (1 + y) / (1 - y); y = 1 is the identity, refused above
  const out = bigintToLe32(mod((1n + y) * pow(1n - y, P - 2n)))
  if (converted.size >= CACHE_LIMIT) converted.delete(converted.keys().next().value!)
  converted.set(id, out)
  return out.slice()
}

/** The X25519 secret scalar of an Ed25519 seed: the first half of SHA-512(seed), clamped. */
export function edSeedToX25519(prims: CryptoPrimitives, seed: Uint8Array): Uint8Array {
  if (seed.length !== 32) throw new Error('an Ed25519 seed is 32 bytes')
  const h = prims.sha512(seed).slice(0, 32)
  h[0]! &= 248
  h[31]! &= 127
  h[31]! |= 64
  return h
}
