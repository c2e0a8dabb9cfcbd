/**
 * The `Range` request header for blob downloads (RFC 9110 §14): one byte range — `bytes=A-B`,
 * `bytes=A-` or the suffix `bytes=-N`. Anything else (another unit, several ranges, malformed text)
 * is ignored and the whole blob is sent, which RFC 9110 allows a server to do.
 */

export type RangeRequest =
  | { kind: 'full' }
  | { kind: 'partial'; start: number; end: number }
  | { kind: 'unsatisfiable' }

const SINGLE = /^bytes=(\d*)-(\d*)$/

/** Resolves a Range header against a representation of `size` bytes; `end` is inclusive. */
export function parseRange(header: string | null, size: number): RangeRequest {
  if (header === null) return { kind: 'full' }
  const m = SINGLE.exec(header.trim())
  if (!m) return { kind: 'full' }
  const [, first, last] = m
  if (first === '' && last === '') return { kind: 'full' }
  if (first.length > 15 || last.length > 15) return { kind: 'full' }
  if (first === '') {
    // suffix: the last N bytes; N = 0 selects nothing
    const n = Number(last)
    if (n === 0 || size === 0) return { kind: 'unsatisfiable' }
    return { kind: 'partial', start: Math.max(0, size - n), end: size - 1 }
  }
  const start = Number(first)
  if (last !== '' && Number(last) < start) return { kind: 'full' } // invalid per RFC 9110: ignored
  if (start >= size) return { kind: 'unsatisfiable' }
  return { kind: 'partial', start, end: last === '' ? size - 1 : Math.min(Number(last), size - 1) }
}
