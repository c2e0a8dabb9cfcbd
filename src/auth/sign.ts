/**
 * Signing for clients, the CLI and tests: pure @noble/curves so the client runs anywhere TypeScript does.
 */
import { ed25519 } from '@noble/curves/ed25519.js'
import { decodeBase64Url, encodeBase64Url } from '../lib/base64url.ts'
import { bodyHash, canonicalString, wsCanonicalString } from './canonical.ts'
import { KEY_FILE_FORMATS } from './key-file-formats.ts'

export interface KeyPair {
  /** 32-byte private seed. */
  seed: Uint8Array
  /** 43-char unpadded base64url public key. */
  publicKey: string
}

export function keyPairFromSeed(seed: Uint8Array): KeyPair {
  if (seed.length !== 32) throw new Error('an Ed25519 seed is 32 bytes')
  return { seed, publicKey: encodeBase64Url(ed25519.getPublicKey(seed)) }
}

export function generateKeyPair(): KeyPair {
  return keyPairFromSeed(ed25519.utils.randomSecretKey())
}

/** Unpadded base64url signature of a UTF-8 string. */
export function signText(seed: Uint8Array, text: string): string {
  return encodeBase64Url(ed25519.sign(new TextEncoder().encode(text), seed))
}

export interface SignedHeaders {
  'X-M2M-Public-Key': string
  'X-M2M-Timestamp': string
  'X-M2M-Signature': string
}

/** The three X-M2M-* headers of a signed request (docs/protocol.md, "Signing"). `pathWithQuery` must be exactly what is sent. */
export function signRequest(
  keys: KeyPair,
  method: string,
  pathWithQuery: string,
  body: Uint8Array | string | null | undefined,
  timestamp: string = new Date().toISOString(),
  hash: string = bodyHash(body),
): SignedHeaders {
  return {
    'X-M2M-Public-Key': keys.publicKey,
    'X-M2M-Timestamp': timestamp,
    'X-M2M-Signature': signText(keys.seed, canonicalString(method, pathWithQuery, timestamp, hash)),
  }
}

/** The WebSocket auth frame: its signature covers `WS\n` + timestamp. */
export function signWsAuth(keys: KeyPair, timestamp: string = new Date().toISOString()) {
  return {
    type: 'auth' as const,
    public_key: keys.publicKey,
    timestamp,
    signature: signText(keys.seed, wsCanonicalString(timestamp)),
  }
}

/** Key file format written by `relay keygen`: JSON with the public key and the base64url seed. */
export interface KeyFile {
  public_key: string
  private_key: string
}

export function encodeKeyFile(keys: KeyPair): string {
  return JSON.stringify({ public_key: keys.publicKey, private_key: encodeBase64Url(keys.seed) } satisfies KeyFile, null, 2) + '\n'
}

/** The key pair of a seed followed by its public key (64 bytes), checking that the halves belong together. */
function fromSecretKey(bytes: Uint8Array): KeyPair {
  const keys = keyPairFromSeed(bytes.subarray(0, 32))
  if (!Buffer.from(bytes.subarray(32)).equals(Buffer.from(decodeBase64Url(keys.publicKey)!))) {
    throw new Error('the key file holds 64 bytes, but its second half is not the public key of its first (seed + public key)')
  }
  return keys
}

/** The 32 (or 64) bytes of a key written as base64 or base64url, padded or not; null for any other text. */
function decodeBase64Any(text: string): Uint8Array | null {
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(text)) return null
  const bytes = Buffer.from(text, 'base64')
  const unpadded = text.replace(/=+$/, '')
  const same = bytes.toString('base64').replace(/=+$/, '') === unpadded || bytes.toString('base64url') === unpadded
  return same && (bytes.length === 32 || bytes.length === 64) ? new Uint8Array(bytes) : null
}

/**
 * The key pair in a key file, whatever MRP tool wrote it: `relay keygen`'s JSON, the raw 32-byte seed
 * (mrp-sdk's `Keypair.save`), the 64-byte seed + public key, or the seed in hex or base64/base64url
 * (surrounding white space ignored). Anything else is an error naming the formats (KEY_FILE_FORMATS).
 */
export function decodeKeyFile(content: string | Uint8Array): KeyPair {
  if (typeof content !== 'string') {
    if (content.length === 32) return keyPairFromSeed(content)
    if (content.length === 64 && !/^[\x20-\x7e\s]*$/.test(Buffer.from(content).toString('latin1'))) return fromSecretKey(content)
    content = new TextDecoder().decode(content)
  }
  const text = content.trim()
  if (text.startsWith('{')) {
    let parsed: Partial<KeyFile>
    try {
      parsed = JSON.parse(text)
    } catch {
      throw new Error('the key file looks like JSON but does not parse')
    }
    const seed = typeof parsed.private_key === 'string' ? decodeBase64Url(parsed.private_key) : null
    if (!seed || seed.length !== 32) throw new Error('the key file has no valid private_key (base64url of 32 bytes)')
    const keys = keyPairFromSeed(seed)
    if (parsed.public_key && parsed.public_key !== keys.publicKey) throw new Error('the key file public_key does not match its private_key')
    return keys
  }
  if (/^[0-9a-fA-F]{64}$/.test(text)) return keyPairFromSeed(Uint8Array.from(Buffer.from(text, 'hex')))
  if (/^[0-9a-fA-F]{128}$/.test(text)) return fromSecretKey(Uint8Array.from(Buffer.from(text, 'hex')))
  const decoded = decodeBase64Any(text)
  if (decoded) return decoded.length === 32 ? keyPairFromSeed(decoded) : fromSecretKey(decoded)
  throw new Error(`not a key this relay can read; a key file holds one of: ${KEY_FILE_FORMATS}`)
}
