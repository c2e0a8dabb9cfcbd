/**
 * Seeded generators of hostile input for the fuzzer: JSON text with boundary numbers, odd escapes and
 * deep nesting; strings long, empty, non-ASCII and broken; path segments and query strings with bad
 * percent-encodings, repeated and empty parameters. Everything comes from one PRNG, so a seed replays
 * the same inputs.
 */
import { MAX_JSON_DEPTH } from '../../src/lib/json-text.ts'

/** mulberry32: small, fast, good enough to pick inputs; the same seed gives the same sequence. */
export class Rng {
  private state: number
  constructor(readonly seed: number) {
    this.state = seed >>> 0
  }
  next(): number {
    this.state = (this.state + 0x6d2b79f5) | 0
    let t = this.state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  int(n: number): number {
    return Math.floor(this.next() * n)
  }
  chance(p: number): boolean {
    return this.next() < p
  }
  pick<T>(list: readonly T[]): T {
    return list[this.int(list.length)]
  }
  bytes(n: number): Uint8Array {
    return Uint8Array.from({ length: n }, () => this.int(256))
  }
}

/** Number texts JSON.parse would change, limits of ranges the relay checks, and plain ones. */
export const BOUNDARY_NUMBERS = [
  '0', '-0', '1', '-1', '1.0', '1.50', '1E2', '1e-7', '1e309', '-1e309', '9007199254740993', '-9007199254740993',
  '18446744073709551616', '0.1e1', '2592000', '2592001', '604800', '4.9e-324', '1.7976931348623157e308', '100', '127', '128', '129',
  '0.30000000000000004', '123456789012345678901234567890',
]

const CHUNKS = [
  'a', 'Z', ' ', '"', "'", '\\', '/', '<', '>', '&', '%', '?', '#', '+', '=', '.', '..', '{', '}', '[', ']', ':', ',', ';',
  'é', 'ß', '日本', '😀', '👩‍👩‍👧', '\u0000', '\u0001', '\u001f', '\u007f', '\u0085', '\u00a0', '\u2028', '\u2029', '\ufeff', '\uffff',
  '\u202e', 'null', 'true', '__proto__', 'constructor', 'toString', '%ff', '%ED%A0%80', '%C0%AF', 'SELECT', "' OR 1=1 --", '*', 'OR', 'NEAR(',
]

/** A string made of awkward pieces, 0–~60 characters, occasionally thousands. */
export function awkwardString(rng: Rng): string {
  if (rng.chance(0.01)) return rng.pick(CHUNKS).repeat(500 + rng.int(3000))
  let s = ''
  const n = rng.int(8)
  for (let i = 0; i < n; i++) s += rng.pick(CHUNKS)
  return s
}

/** A JSON string literal (text), with escapes of every kind, lone surrogates included. */
export function jsonStringText(rng: Rng): string {
  const r = rng.next()
  if (r < 0.5) return JSON.stringify(awkwardString(rng))
  if (r < 0.6) return '"' + rng.pick(['\\ud800', '\\udfff', '\\ud800\\ud800', '\\udc00\\ud800', 'a\\ud83d', '\\ud83d\\ude00']) + '"'
  if (r < 0.7) return '"' + rng.pick(['\\u0000', '\\/', '\\b\\f\\n\\r\\t', '\\u00e9', '\\"', '\\\\']) + awkwardString(rng).replace(/["\\\u0000-\u001f]/g, '') + '"'
  return JSON.stringify(rng.pick(['', 'x', 'hello', 'application/json', 'text/plain', 'msg_1_000000000000', 'blob_000000000000000000000000']))
}

/** Random JSON text nested at most `depth` levels, with random spacing. */
export function jsonText(rng: Rng, depth = 4): string {
  const ws = () => (rng.chance(0.15) ? rng.pick([' ', '\n', '\t', '  ', '\r\n']) : '')
  const r = rng.next()
  if (depth <= 0 || r < 0.45) {
    const k = rng.next()
    if (k < 0.4) return rng.pick(BOUNDARY_NUMBERS)
    if (k < 0.8) return jsonStringText(rng)
    return rng.pick(['true', 'false', 'null'])
  }
  const n = rng.int(5)
  if (r < 0.7) return ws() + '[' + Array.from({ length: n }, () => ws() + jsonText(rng, depth - 1) + ws()).join(',') + ']'
  return ws() + '{' + Array.from({ length: n }, () => `${ws()}${jsonStringText(rng)}${ws()}:${jsonText(rng, depth - 1)}`).join(',') + '}'
}

/** Nested arrays `levels` deep, around the documented limit or far beyond it. */
export function deepText(rng: Rng): string {
  const levels = rng.pick([MAX_JSON_DEPTH - 2, MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1, 1000, 20_000])
  return '['.repeat(levels) + ']'.repeat(rng.chance(0.9) ? levels : rng.int(levels))
}

/** Text that is not JSON, or not quite. */
export function brokenJsonText(rng: Rng): string {
  return rng.pick([
    '', '{', '}', '{"a":}', '{"a":1,}', "{'a':1}", '[1,2', 'NaN', 'undefined', '{"a":01}', '{"a":.5}', '{"a":+1}', '{"a":0x10}',
    '{"a":"\u0001"}', '{"a":"\\x41"}', '{"a":"\\u12"}', '{"a" 1}', '\ufeff{}', '{}{}', '{"a":1} x', '/* c */ {}', '{"a":Infinity}',
  ])
}

/** A path segment: a real key, `me`, random text, bad percent-encodings, dot segments. */
export function pathSegment(rng: Rng, real: string[]): string {
  const r = rng.next()
  if (r < 0.35 && real.length) return rng.pick(real)
  if (r < 0.45) return 'me'
  if (r < 0.6) return rng.pick(['%ff%fe', '%ED%A0%80', '%C0%AF', '%E2%82', '%F4%90%80%80', '%', '%z', '%00', '%2F', '%2e%2e', '..', '.', '', '%20', '+'])
  if (r < 0.8) return encodeURIComponent(awkwardString(rng)).slice(0, 300)
  if (r < 0.9) {
    const hex = Array.from(rng.bytes(1 + rng.int(6)), (b) => '%' + b.toString(16).padStart(2, '0')).join('')
    return rng.chance(0.5) ? hex.toUpperCase() : hex
  }
  return 'x'.repeat(rng.pick([43, 44, 128, 129, 1000]))
}

/** A query string from known and unknown names: repeated, empty, valueless and badly encoded ones. */
export function queryString(rng: Rng, names: string[], value: (name: string) => string): string {
  if (rng.chance(0.3)) return ''
  const parts: string[] = []
  const n = 1 + rng.int(4)
  for (let i = 0; i < n; i++) {
    const r = rng.next()
    const name = r < 0.8 ? rng.pick(names) : rng.pick(['', 'x', '%ff', 'limit[]', '__proto__', encodeURIComponent(awkwardString(rng))])
    if (rng.chance(0.05)) parts.push('')
    else if (rng.chance(0.05)) parts.push(name)
    else parts.push(`${name}=${rng.chance(0.7) ? value(name) : pathSegment(rng, [])}`)
    if (rng.chance(0.1)) parts.push(parts[parts.length - 1]) // repeated
  }
  return '?' + parts.join('&')
}
