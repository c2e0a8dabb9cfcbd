/** The pure parts of discovery: words from free text, their FTS5 expressions, LIKE patterns, cursors. */
import { Database } from 'bun:sqlite'
import { describe, expect, test } from 'bun:test'
import { decodeCursor, encodeCursor, parseIntInRange, textSearch } from '../../src/services/discovery-params.ts'
import { ftsMatch, substringLike } from '../../src/storage/sqlite/discovery-store.ts'

/** textSearch, with the FTS5 expression SQLite storage builds from its words. */
const fts = (q: string | undefined) => {
  const s = textSearch(q)
  return s.kind === 'match' ? { kind: s.kind, expression: ftsMatch(s.terms), words: s.words } : s
}

describe('textSearch', () => {
  test('quotes every word, doubles inner quotes, matches each as a prefix, ANDs them', () => {
    expect(fts('translate text')).toEqual({ kind: 'match', expression: '"translate"* AND "text"*', words: 2 })
    expect(fts('say "hi" OR NEAR(x)')).toEqual({ kind: 'match', expression: '"say"* AND """hi"""* AND "OR"* AND "NEAR(x)"*', words: 4 })
    expect(fts('a*b')).toEqual({ kind: 'match', expression: '"a*b"*', words: 1 })
  })
  test('drops words without letters or digits; none left → matches nothing; blank → absent', () => {
    expect(fts('*** translate !!!')).toEqual({ kind: 'match', expression: '"translate"*', words: 3 })
    expect(fts('*** " !!!')).toEqual({ kind: 'none', words: 3 })
    expect(fts('😀')).toEqual({ kind: 'none', words: 1 })
    expect(fts('  \t\n ')).toEqual({ kind: 'absent' })
    expect(fts('')).toEqual({ kind: 'absent' })
    expect(fts(undefined)).toEqual({ kind: 'absent' })
  })
  test('control characters separate words (a NUL never reaches FTS5)', () => {
    expect(fts('a\u0000b')).toEqual({ kind: 'match', expression: '"a"* AND "b"*', words: 2 })
    expect(fts('\u0000')).toEqual({ kind: 'absent' })
  })
  test('unicode letters and digits are searchable', () => {
    expect(fts('中文 ٣ café').kind).toBe('match')
  })
  test('every expression it builds is valid FTS5', () => {
    const db = new Database(':memory:')
    db.run(`CREATE VIRTUAL TABLE f USING fts5(a, tokenize = 'unicode61 remove_diacritics 2', prefix = '1 2 3 4')`)
    db.run(`INSERT INTO f(a) VALUES ('hello world')`)
    const inputs = ['"', '""', "'", 'NEAR(a b)', 'a OR b', '(', ')', '^x', 'a:b', '-', '+x', '\\', '*', 'x*', '"x', 'x"', 'é', '\u0301x', '\ud800', '\uffff', 'AND', 'NOT']
    for (const a of inputs) {
      for (const b of inputs) {
        const s = fts(`${a} ${b}hello`)
        if (s.kind === 'match') expect(() => db.query('SELECT rowid FROM f WHERE f MATCH ?').all(s.expression as string)).not.toThrow()
      }
    }
  })
})

describe('substringLike', () => {
  test('escapes %, _ and \\', () => {
    expect(substringLike('100%')).toBe('%100\\%%')
    expect(substringLike('a_b')).toBe('%a\\_b%')
    expect(substringLike('a\\b')).toBe('%a\\\\b%')
    expect(substringLike('plain')).toBe('%plain%')
  })
})

describe('cursor', () => {
  const key = 'A'.repeat(21) + '-_' + 'z'.repeat(19) + 'w'
  test('round-trips and is opaque base64url', () => {
    const c = encodeCursor({ lastActiveAt: 1795341600123, publicKey: key })
    expect(c).toMatch(/^[A-Za-z0-9_-]+$/)
    expect(decodeCursor(c)).toEqual({ lastActiveAt: 1795341600123, publicKey: key })
  })
  test('rejects anything it did not issue', () => {
    const enc = (s: string) => Buffer.from(s).toString('base64url')
    for (const bad of ['', 'x', '!!!!', enc('1.short'), enc(`-1.${key}`), enc(`1.5.${key}`), enc(`${'9'.repeat(16)}.${key}`), enc(`1.${key}x`), enc(`1,${key}`), Buffer.from(`12.${key}`).toString('base64')]) {
      expect(decodeCursor(bad)).toBeNull()
    }
  })
})

test('parseIntInRange is strict', () => {
  expect(parseIntInRange('20', 1, 100)).toBe(20)
  for (const bad of ['0', '101', '-1', '1.0', '1e2', ' 5', '0x10', '', 'abc', '9999999999']) expect(parseIntInRange(bad, 1, 100)).toBeNull()
  expect(parseIntInRange('007', 1, 100)).toBe(7)
})
