/**
 * Byte helpers for the encryption formats. No `Buffer`: the same code runs in Bun, Node and a browser.
 */

export const utf8 = new TextEncoder()
const utf8Strict = new TextDecoder('utf-8', { fatal: true })

export function fromUtf8(bytes: Uint8Array): string {
  return utf8Strict.decode(bytes)
}

export function concatBytes(...parts: Uint8Array[]): Uint8Array {
  let size = 0
  for (const p of parts) size += p.length
  const out = new Uint8Array(size)
  let at = 0
  for (const p of parts) {
    out.set(p, at)
    at += p.length
  }
  return out
}

/** Big-endian unsigned integer of `length` bytes (RFC 9180's I2OSP); `value` below 2^53. */
export function i2osp(value: number, length: number): Uint8Array {
  const out = new Uint8Array(length)
  let v = value
  for (let i = length - 1; i >= 0 && v > 0; i--) {
    out[i] = v % 256
    v = Math.floor(v / 256)
  }
  return out
}

/** A short byte string (a key, a label) as a Map key; `apply`, not a spread, which costs several times more. */
export function bytesKey(...parts: Uint8Array[]): string {
  let id = ''
  for (const part of parts) id += String.fromCharCode.apply(null, part as unknown as number[])
  return id
}

export function readUint(bytes: Uint8Array, at: number, length: number): number {
  let v = 0
  for (let i = 0; i < length; i++) v = v * 256 + bytes[at + i]!
  return v
}

/** Compares in time that depends only on the lengths. */
export function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false
  let diff = 0
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ b[i]!
  return diff === 0
}

export function isAllZero(bytes: Uint8Array): boolean {
  let acc = 0
  for (let i = 0; i < bytes.length; i++) acc |= bytes[i]!
  return acc === 0
}

export function toHex(bytes: Uint8Array): string {
  let s = ''
  for (let i = 0; i < bytes.length; i++) s += bytes[i]!.toString(16).padStart(2, '0')
  return s
}

export function fromHex(hex: string): Uint8Array {
  if (hex.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(hex)) throw new Error('not hex')
  const out = new Uint8Array(hex.length / 2)
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16)
  return out
}

const B64URL = /^[A-Za-z0-9_-]*$/

// Uint8Array.fromBase64 / toBase64 (TC39, in Bun, recent browsers and Node): native, many times faster
interface NativeBase64 {
  fromBase64(text: string, opts: { alphabet: 'base64url'; lastChunkHandling: 'loose' }): Uint8Array
}
type NativeBase64Bytes = Uint8Array & { toBase64(opts: { alphabet: 'base64url'; omitPadding: boolean }): string }
const NATIVE_BASE64 =
  typeof (Uint8Array as unknown as Partial<NativeBase64>).fromBase64 === 'function' &&
  typeof (Uint8Array.prototype as Partial<NativeBase64Bytes>).toBase64 === 'function'

/** Unpadded base64url, the encoding of every byte string in the encrypted formats. */
export function toBase64Url(bytes: Uint8Array): string {
  if (NATIVE_BASE64) return (bytes as NativeBase64Bytes).toBase64({ alphabet: 'base64url', omitPadding: true })
  let bin = ''
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000))
  return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')
}

/** Strict unpadded base64url, or null (other alphabets, padding, impossible lengths, non-canonical bits). */
export function fromBase64Url(text: string): Uint8Array | null {
  if (typeof text !== 'string' || !B64URL.test(text) || text.length % 4 === 1) return null
  if (NATIVE_BASE64) {
    let out: Uint8Array
    try {
      out = (Uint8Array as unknown as NativeBase64).fromBase64(text, { alphabet: 'base64url', lastChunkHandling: 'loose' })
    } catch {
      return null
    }
    // re-encoding refuses non-canonical trailing bits
    return toBase64Url(out) === text ? out : null
  }
  const padded = text.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (text.length % 4)) % 4)
  let bin: string
  try {
    bin = atob(padded)
  } catch {
    return null
  }
  const out = new Uint8Array(bin.length)
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i)
  return toBase64Url(out) === text ? out : null
}
