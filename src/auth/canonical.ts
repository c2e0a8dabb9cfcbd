/** The canonical string of SPEC §1.1 and the body hash; shared by server, client and tests. */
import { createHash } from 'node:crypto'

export const EMPTY_BODY_HASH = '47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU'

/** Unpadded base64url SHA-256 of the raw body bytes. */
export function bodyHash(body: Uint8Array | string | null | undefined): string {
  if (body === null || body === undefined || body.length === 0) return EMPTY_BODY_HASH
  return createHash('sha256').update(body).digest('base64url')
}

/** `METHOD\nPATH\nTIMESTAMP\nBODY_HASH` — PATH is the raw request target (path plus query). */
export function canonicalString(method: string, pathWithQuery: string, timestamp: string, hash: string): string {
  return `${method.toUpperCase()}\n${pathWithQuery}\n${timestamp}\n${hash}`
}

/** The WebSocket auth frame signs `WS\n` + timestamp (SPEC §8). */
export const wsCanonicalString = (timestamp: string): string => `WS\n${timestamp}`
