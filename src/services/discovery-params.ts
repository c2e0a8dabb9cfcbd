/**
 * Turning discovery query text into safe search inputs (docs/protocol.md §3): FTS5 expressions that user input can
 * never break, LIKE patterns with literal wildcards, and the opaque page cursor.
 */
import { PUBLIC_KEY_PATTERN } from '../auth/keys.ts'
import { decodePosition, encodePosition } from '../lib/cursor.ts'
import type { DiscoveryPosition } from './models/records.ts'

/** What `q` becomes: the words to match, or `none` when no word holds anything searchable. */
export type TextSearch = { kind: 'match'; terms: string[]; words: number } | { kind: 'none'; words: number } | { kind: 'absent' }

/** Word separators: white space and control characters (a NUL would end a query text early). */
const SEPARATORS = /[\s\p{Cc}]+/u
/** What a word must hold to be searched: a letter, a digit or a private-use character. */
const SEARCHABLE = /[\p{L}\p{N}\p{Co}]/u

/**
 * Splits free text into words, each to be matched as a prefix, ANDed (docs/protocol.md §3). A word with
 * no letter or digit would match nothing and empty the whole AND; such words are dropped. When every
 * word is dropped the search is `none` (it matches no agent). Storage quotes the words for its engine,
 * so punctuation in them is always text, never query syntax.
 */
export function textSearch(q: string | undefined): TextSearch {
  const words = (q ?? '').split(SEPARATORS).filter((w) => w.length > 0)
  if (words.length === 0) return { kind: 'absent' }
  const terms = [...new Set(words.filter((w) => SEARCHABLE.test(w)))]
  if (terms.length === 0) return { kind: 'none', words: words.length }
  return { kind: 'match', terms, words: words.length }
}

/** The opaque cursor of a page's last entry. */
export function encodeCursor(pos: DiscoveryPosition): string {
  return encodePosition(pos.lastActiveAt, pos.publicKey)
}

/** The position a cursor names, or null when it is not one this relay issued. */
export function decodeCursor(cursor: string): DiscoveryPosition | null {
  const pos = decodePosition(cursor, PUBLIC_KEY_PATTERN)
  return pos && { lastActiveAt: pos.n, publicKey: pos.id }
}

/** A strict decimal integer in [min, max], or null. */
export function parseIntInRange(text: string, min: number, max: number): number | null {
  if (!/^[0-9]{1,9}$/.test(text)) return null
  const n = Number(text)
  return n >= min && n <= max ? n : null
}
