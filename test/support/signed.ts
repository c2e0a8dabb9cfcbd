import { bodyHash } from '../../src/auth/canonical.ts'
import { signRequest, type KeyPair } from '../../src/auth/sign.ts'
import { BASE_URL } from './harness.ts'

const lastByKey = new Map<string, number>()
/**
 * A timestamp unique per key within this process, from the given clock time. Test files run relays
 * with their own fake clocks, so a clock far behind the last value starts afresh.
 */
export function uniqueTimestamp(nowMs: number, key = ''): string {
  const last = lastByKey.get(key) ?? 0
  const ms = nowMs < last - 60_000 ? nowMs : Math.max(nowMs, last + 1)
  lastByKey.set(key, ms)
  return new Date(ms).toISOString()
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
  const timestamp = opts.timestamp ?? uniqueTimestamp(opts.nowMs ?? Date.now(), keys.publicKey)
  const s = opts.sign ?? {}
  const h = signRequest(keys, s.method ?? method, s.path ?? path, undefined, s.timestamp ?? timestamp, bodyHash(s.body ?? opts.body))
  const headers: Record<string, string> = { ...h, 'X-M2M-Timestamp': timestamp, ...opts.headers }
  if (opts.body !== undefined && !headers['content-type']) headers['content-type'] = 'application/json'
  return new Request(BASE_URL + path, { method, headers, body: opts.body as any })
}
