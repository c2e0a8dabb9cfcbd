import { bodyHash } from '../../src/auth/canonical.ts'
import { signRequest, type KeyPair } from '../../src/auth/sign.ts'
import { BASE_URL } from './harness.ts'

let last = 0
/** A timestamp unique within this process, from the given clock time. */
export function uniqueTimestamp(nowMs: number): string {
  last = Math.max(nowMs, last + 1)
  return new Date(last).toISOString()
}

/**
 * Builds a signed Request by hand so tests can tamper with any part after signing.
 * `sign` overrides what is signed; `send` overrides what is sent.
 */
export function signed(
  keys: KeyPair,
  method: string,
  path: string,
  opts: {
    body?: string | Uint8Array
    timestamp?: string
    nowMs?: number
    sign?: { method?: string; path?: string; body?: string | Uint8Array; timestamp?: string }
    headers?: Record<string, string>
  } = {},
): Request {
  const timestamp = opts.timestamp ?? uniqueTimestamp(opts.nowMs ?? Date.now())
  const s = opts.sign ?? {}
  const h = signRequest(keys, s.method ?? method, s.path ?? path, undefined, s.timestamp ?? timestamp, bodyHash(s.body ?? opts.body))
  const headers: Record<string, string> = { ...h, 'X-M2M-Timestamp': timestamp, ...opts.headers }
  if (opts.body !== undefined && !headers['content-type']) headers['content-type'] = 'application/json'
  return new Request(BASE_URL + path, { method, headers, body: opts.body as any })
}
