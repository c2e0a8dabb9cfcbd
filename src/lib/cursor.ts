/**
 * Opaque page cursors: base64url of `<integer>.<id>`, the position (a time and an id) of a page's last
 * entry. One codec for every paged list; each list says which ids it accepts.
 */
import { decodeBase64Url } from './base64url.ts'

const POSITION = /^(\d{1,15})\.(.+)$/s

export function encodePosition(n: number, id: string): string {
  return Buffer.from(`${n}.${id}`, 'utf8').toString('base64url')
}

/** The position a cursor names, or null when it is not one this relay issued. `idPattern` is anchored. */
export function decodePosition(cursor: string, idPattern: RegExp): { n: number; id: string } | null {
  if (cursor.length > 128) return null
  const bytes = decodeBase64Url(cursor)
  const m = bytes ? POSITION.exec(Buffer.from(bytes).toString('latin1')) : null
  if (!m || !idPattern.test(m[2])) return null
  const n = Number(m[1])
  return Number.isSafeInteger(n) ? { n, id: m[2] } : null
}
