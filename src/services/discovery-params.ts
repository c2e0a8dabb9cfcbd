/**
 * Turning discovery query text into safe search inputs (SPEC §3): FTS5 expressions that user input can
 * never break, LIKE patterns with literal wildcards, and the opaque page cursor.
 */
import { PUBLIC_KEY_PATTERN } from '../auth/keys.ts'
import { decodePosition, encodePosition } from '../lib/cursor.ts'
import type { DiscoveryPosition } from '../storage/discovery-repo.ts'

/** What `q` becomes: the FTS5 expression, or `none` when no word holds anything searchable. */
export type TextSearch = { kind: 'match'; expression: string; words: number } | { kind: 'none'; words: number } | { kind: 'absent' }

/** Word separators: white space and control characters (a NUL would end the FTS5 query text early). */
const SEPARATORS = /[\s\p{Cc}]+/u
/** What the unicode61 tokenizer keeps as token characters (its default categories L*, N*, Co). */
const SEARCHABLE = /[\p{L}\p{N}\p{Co}]/u

/**
 * Builds an FTS5 expression from free text: each word becomes a quoted string (inner `"` doubled)
 * matched as a prefix (`"word"*`), and the words are ANDed. Quoting makes every character text, so
 * `OR`, `NEAR`, `*`, `^`, `:`, parentheses and unbalanced quotes are searched for, never obeyed. A word
 * with no letter or digit would become an empty phrase, which matches nothing and would empty the whole
 * AND; such words are dropped. When every word is dropped the search is `none` (it matches no agent).
 */
export function textSearch(q: string | undefined): TextSearch {
  const words = (q ?? '').split(SEPARATORS).filter((w) => w.length > 0)
  if (words.length === 0) return { kind: 'absent' }
  const terms = words.filter((w) => SEARCHABLE.test(w)).map((w) => `"${w.replaceAll('"', '""')}"*`)
  if (terms.length === 0) return { kind: 'none', words: words.length }
  return { kind: 'match', expression: [...new Set(terms)].join(' AND '), words: words.length }
}

/** `%substring%` for LIKE … ESCAPE '\', with `%`, `_` and `\` in the substring taken literally. */
export function substringLike(name: string): string {
  return `%${name.replace(/[\\%_]/g, (c) => `\\${c}`)}%`
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
