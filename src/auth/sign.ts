/**
 * Signing for clients, the CLI and tests: pure @noble/curves so the client runs anywhere TypeScript does.
 */
import { ed25519 } from '@noble/curves/ed25519.js'
import { decodeBase64Url, encodeBase64Url } from '../lib/base64url.ts'
import { bodyHash, canonicalString, wsCanonicalString } from './canonical.ts'

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

export function decodeKeyFile(text: string): KeyPair {
  let parsed: Partial<KeyFile>
  try {
    parsed = JSON.parse(text)
  } catch {
    throw new Error('the key file is not JSON')
  }
  const seed = typeof parsed.private_key === 'string' ? decodeBase64Url(parsed.private_key) : null
  if (!seed || seed.length !== 32) throw new Error('the key file has no valid private_key (base64url of 32 bytes)')
  const keys = keyPairFromSeed(seed)
  if (parsed.public_key && parsed.public_key !== keys.publicKey) throw new Error('the key file public_key does not match its private_key')
  return keys
}
