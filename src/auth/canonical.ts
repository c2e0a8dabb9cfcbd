/** The canonical string of a signed request and the body hash; shared by server, client and tests. */
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

/** The WebSocket auth frame signs `WS\n` + timestamp. */
export const wsCanonicalString = (timestamp: string): string => `WS\n${timestamp}`

/*
 * What the HTTP layer changes in a request target before the relay sees it. The runtime gives the
 * request's URL as a WHATWG URL, not the bytes of the request line, and builds it by percent-encoding
 * (uppercase hex) some characters a client may send raw (measured with a raw socket for every byte,
 * test/auth/raw-target.test.ts):
 *   path:  " < > ^ ` { } DEL, and every non-ASCII character (as its UTF-8 bytes)
 *   query: " ' < > DEL, and every non-ASCII character
 * Those encodings are undone here to recover the target as sent. Lossy changes cannot be undone and
 * such targets cannot be verified: a raw `\` in the path becomes `/`, `.` and `..` segments (also as
 * %2e) are resolved away, bytes that are not UTF-8 become U+FFFD; spaces and control characters are
 * refused by the runtime before the relay sees the request.
 */
const ADDED_IN_PATH = new Set(['22', '3C', '3E', '5E', '60', '7B', '7D', '7F'])
const ADDED_IN_QUERY = new Set(['22', '27', '3C', '3E', '7F'])
const utf8 = new TextDecoder('utf-8', { fatal: true })

/** Bytes of a UTF-8 sequence starting with `lead`, or 0 when it cannot start one. */
const sequenceLength = (lead: number) => (lead >= 0xc2 && lead <= 0xdf ? 2 : lead >= 0xe0 && lead <= 0xef ? 3 : lead >= 0xf0 && lead <= 0xf4 ? 4 : 0)

/** Undoes the encodings the runtime adds in one part of the target (uppercase escapes only). */
function undoAdded(part: string, ascii: Set<string>): string {
  return part.replace(/(?:%[0-9A-F]{2})+/g, (run) => {
    const hex = run.slice(1).split('%')
    let out = ''
    for (let i = 0; i < hex.length; ) {
      const b = parseInt(hex[i], 16)
      if (b < 0x80) {
        out += ascii.has(hex[i]) ? String.fromCharCode(b) : `%${hex[i]}`
        i++
        continue
      }
      const n = sequenceLength(b)
      if (n > 0 && i + n <= hex.length) {
        try {
          out += utf8.decode(Uint8Array.from(hex.slice(i, i + n), (h) => parseInt(h, 16)))
          i += n
          continue
        } catch {
          // not one UTF-8 character: the escape was the client's own
        }
      }
      out += `%${hex[i]}`
      i++
    }
    return out
  })
}

/**
 * The targets the client may have signed for a request the relay received with target `received`:
 * `received` itself (the client percent-encoded those characters itself), then, when different, the
 * target with the runtime's own encodings undone (the client sent them raw). A client that mixes both
 * forms of one such character in one target cannot be told apart and should send one form only.
 */
export function signedTargets(received: string): string[] {
  if (!received.includes('%')) return [received]
  const q = received.indexOf('?')
  const raw = q < 0 ? undoAdded(received, ADDED_IN_PATH) : undoAdded(received.slice(0, q), ADDED_IN_PATH) + '?' + undoAdded(received.slice(q + 1), ADDED_IN_QUERY)
  return raw === received ? [received] : [received, raw]
}

/** The canonical strings to try for a received request, in the order of `signedTargets`. */
export function canonicalStrings(method: string, received: string, timestamp: string, hash: string): string[] {
  return signedTargets(received).map((target) => canonicalString(method, target, timestamp, hash))
}
