/**
 * JSON text kept exactly as a client sent it. `JSON.parse` turns `9007199254740993` into
 * `9007199254740992`, `1e309` into `Infinity` (then `null`), `-0` into `0` and `1.0` into `1`, and
 * recursion on a deeply nested document can exhaust the stack. So request documents are parsed here:
 *
 * - `parseJsonText` first measures the nesting depth without recursion and refuses anything deeper than
 *   `MAX_JSON_DEPTH`, then parses, then remembers where each member of the top-level object (and of the
 *   objects directly inside it) sits in the text, so `rawMemberText` can hand back a member's value
 *   byte for byte (what messages store for `body` and `metadata`).
 * - `RawJson` carries such text through serializers; `stringifyJson` splices it into a document
 *   unchanged (responses, WebSocket pushes, webhook payloads).
 * - `parseExact` parses stored text so that every number keeps the digits it was written with
 *   (`JSON.rawJSON`), for values that are re-serialized rather than spliced (profile metadata,
 *   capabilities).
 */

/**
 * Deepest nesting of arrays and objects in a request body or WebSocket frame; the outermost value
 * counts as one level. Generous for any real message, and far below what recursion in the runtime's
 * parser and serializer can take.
 */
export const MAX_JSON_DEPTH = 128

/** Why a text is not an acceptable JSON document. */
export class JsonTextError extends Error {
  constructor(
    readonly kind: 'syntax' | 'depth',
    message: string,
  ) {
    super(message)
    this.name = 'JsonTextError'
  }
}

/** JSON text to be emitted as it is (see `stringifyJson`). */
export class RawJson {
  constructor(readonly text: string) {}
  /** Serializers that do not know RawJson still get the value, with its numbers exact. */
  toJSON(): unknown {
    return parseExact(this.text)
  }
}

interface Located {
  text: string
  /** Span of the object's own text, from `{` to `}` inclusive. */
  start: number
  end: number
  /** Member name → [start, end) of its value; computed on first use. */
  members?: Map<string, [number, number]>
}

const located = new WeakMap<object, Located>()

const QUOTE = 0x22
const BACKSLASH = 0x5c

/** Index just past the string whose opening quote is at `i`; text.length when it is unterminated. */
function skipString(text: string, i: number): number {
  let j = i + 1
  for (;;) {
    const q = text.indexOf('"', j)
    if (q < 0) return text.length
    // the quote is escaped when an odd number of backslashes precede it
    let b = q - 1
    while (b > i && text.charCodeAt(b) === BACKSLASH) b--
    if ((q - 1 - b) % 2 === 0) return q + 1
    j = q + 1
  }
}

/**
 * The deepest nesting of arrays and objects in `text`, stopping early once `limit` is passed. Strings
 * are skipped, so brackets inside them do not count. Iterative: any depth is measured safely.
 */
export function jsonDepth(text: string, limit = Infinity): number {
  let depth = 0
  let max = 0
  for (let i = 0; i < text.length; ) {
    const c = text.charCodeAt(i)
    if (c === QUOTE) {
      i = skipString(text, i)
      continue
    }
    if (c === 0x7b || c === 0x5b) {
      if (++depth > max && (max = depth) > limit) return max
    } else if (c === 0x7d || c === 0x5d) depth--
    i++
  }
  return max
}

/**
 * Parses a request document: refuses nesting deeper than `maxDepth` (without recursing), then parses
 * and remembers where the members of the top-level object and of the objects directly inside it are.
 * Throws JsonTextError.
 */
export function parseJsonText(text: string, maxDepth = MAX_JSON_DEPTH): unknown {
  if (jsonDepth(text, maxDepth) > maxDepth) {
    throw new JsonTextError('depth', `JSON nested deeper than ${maxDepth} levels`)
  }
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    throw new JsonTextError('syntax', 'Malformed JSON')
  }
  if (isObject(value)) {
    const start = skipSpace(text, 0)
    const root: Located = { text, start, end: text.length }
    located.set(value, root)
    // objects one level down (a WebSocket frame's `message`) can answer rawMemberText too
    for (const [name, [s, e]] of membersOf(root)) {
      const child = (value as Record<string, unknown>)[name]
      if (isObject(child) && text.charCodeAt(s) === 0x7b) located.set(child, { text, start: s, end: e })
    }
  }
  return value
}

/**
 * The exact text of member `name` of an object returned by `parseJsonText` (or one directly inside
 * it); undefined when the object was not parsed there or has no such member.
 */
export function rawMemberText(obj: unknown, name: string): string | undefined {
  if (!isObject(obj)) return undefined
  const loc = located.get(obj)
  if (!loc) return undefined
  const span = membersOf(loc).get(name)
  return span && loc.text.slice(span[0], span[1])
}

/** The text of `obj[name]` as sent when known, else serialized with its numbers exact. */
export function memberText(obj: Record<string, unknown>, name: string): string {
  return rawMemberText(obj, name) ?? JSON.stringify(obj[name])
}

function isObject(v: unknown): v is object {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

function skipSpace(text: string, i: number): number {
  while (i < text.length) {
    const c = text.charCodeAt(i)
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break
    i++
  }
  return i
}

/** Index just past the value starting at `i` in valid JSON text. */
function skipValue(text: string, i: number): number {
  const c = text.charCodeAt(i)
  if (c === QUOTE) return skipString(text, i)
  if (c === 0x7b || c === 0x5b) {
    let depth = 0
    while (i < text.length) {
      const d = text.charCodeAt(i)
      if (d === QUOTE) {
        i = skipString(text, i)
        continue
      }
      if (d === 0x7b || d === 0x5b) depth++
      else if ((d === 0x7d || d === 0x5d) && --depth === 0) return i + 1
      i++
    }
    return i
  }
  // a number, true, false or null: runs to the next delimiter
  while (i < text.length) {
    const d = text.charCodeAt(i)
    if (d === 0x2c || d === 0x7d || d === 0x5d || d === 0x20 || d === 0x0a || d === 0x0d || d === 0x09) break
    i++
  }
  return i
}

/** Member spans of a located object (valid JSON); a repeated name keeps its last value, as JSON.parse does. */
function membersOf(loc: Located): Map<string, [number, number]> {
  if (loc.members) return loc.members
  const { text } = loc
  const members = new Map<string, [number, number]>()
  let i = skipSpace(text, loc.start + 1)
  while (i < loc.end && text.charCodeAt(i) === QUOTE) {
    const keyEnd = skipString(text, i)
    const rawKey = text.slice(i + 1, keyEnd - 1)
    const name = rawKey.includes('\\') ? (JSON.parse(text.slice(i, keyEnd)) as string) : rawKey
    const valueStart = skipSpace(text, skipSpace(text, keyEnd) + 1) // past the colon
    const valueEnd = skipValue(text, valueStart)
    members.set(name, [valueStart, valueEnd])
    i = skipSpace(text, valueEnd)
    if (text.charCodeAt(i) !== 0x2c) break
    i = skipSpace(text, i + 1)
  }
  loc.members = members
  return members
}

/**
 * A number is kept as JSON.rawJSON when serializing the parsed number would not give back its text
 * (more than 15 significant digits, a fraction or exponent, -0). This test finds every such text,
 * and some harmless ones, cheaply.
 */
const MAYBE_INEXACT = /\d[.eE]|\d{16}|-0/

const { rawJSON: rawJson, isRawJSON } = JSON as unknown as { rawJSON(text: string): unknown; isRawJSON(value: unknown): boolean }

function keepNumberText(this: unknown, _key: string, value: unknown, context?: { source?: string }): unknown {
  if (typeof value === 'number' && context?.source !== undefined && JSON.stringify(value) !== context.source) return rawJson(context.source)
  return value
}

/**
 * Parses JSON text so that serializing the result gives every number back with the digits it had
 * (`9007199254740993`, `1e309`, `-0`, `1.0` stay as written). Strings, keys and structure are
 * unchanged; insignificant white space is not kept.
 */
export function parseExact(text: string): unknown {
  const value = JSON.parse(text)
  // most texts hold no such number, or were written by JSON.stringify and read back unchanged
  if (!MAYBE_INEXACT.test(text) || JSON.stringify(value) === text) return value
  return JSON.parse(text, keepNumberText as (key: string, value: unknown) => unknown)
}

/**
 * JSON.stringify that emits RawJson values as their text. Plain objects, arrays and primitives as
 * JSON.stringify would; `undefined` members are left out.
 */
export function stringifyJson(value: unknown): string {
  if (value instanceof RawJson) return value.text
  if (Array.isArray(value)) {
    let out = '['
    for (let i = 0; i < value.length; i++) {
      const v = value[i]
      out += (i ? ',' : '') + (v === undefined || typeof v === 'function' ? 'null' : stringifyJson(v))
    }
    return out + ']'
  }
  if (value !== null && typeof value === 'object' && typeof (value as { toJSON?: unknown }).toJSON !== 'function' && !isRawJSON(value)) {
    let out = '{'
    let first = true
    for (const [k, v] of Object.entries(value)) {
      if (v === undefined || typeof v === 'function') continue
      out += (first ? '' : ',') + JSON.stringify(k) + ':' + stringifyJson(v)
      first = false
    }
    return out + '}'
  }
  return JSON.stringify(value) ?? 'null'
}
