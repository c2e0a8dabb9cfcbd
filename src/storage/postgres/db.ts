/**
 * What the PostgreSQL stores share: a handle to run statements on (the pool, or one transaction), and
 * small helpers over Bun.SQL's `unsafe` with `$n` parameters.
 *
 * - Times are bigint columns, which the driver returns as strings: statements cast them to float8
 *   (exact for millisecond times) when they select them.
 * - PostgreSQL text cannot hold U+0000, which well-formed Unicode text (a display name, a thread id)
 *   may contain and SQLite stores as is. Every string going in is escaped with U+FDD0 (a noncharacter)
 *   as the escape character — U+0000 becomes U+FDD0 U+FDD1 and U+FDD0 itself U+FDD0 U+FDD2 (noncharacters
 *   too, so a text search for ordinary characters never matches an escape) — and every string coming out
 *   is unescaped, so any text round-trips exactly and equal strings stay equal.
 */
import type { SQL } from 'bun'

export type Db = SQL

const NUL = '\u0000'
const MARK = '\uFDD0'
const NEEDS_ESCAPE = /[\u0000\uFDD0]/
const ESCAPABLE = /[\u0000\uFDD0]/g
const ESCAPED = /\uFDD0[\uFDD1\uFDD2]/g

/** A string as stored: U+0000 and U+FDD0 escaped. */
export function escapeText(s: string): string {
  return NEEDS_ESCAPE.test(s) ? s.replace(ESCAPABLE, (c) => (c === NUL ? MARK + '\uFDD1' : MARK + '\uFDD2')) : s
}

/** A stored string as it was given. */
export function unescapeText(s: string): string {
  return s.includes(MARK) ? s.replace(ESCAPED, (m) => (m[1] === '\uFDD1' ? NUL : MARK)) : s
}

function param(v: unknown): unknown {
  if (typeof v === 'string') return escapeText(v)
  if (Array.isArray(v)) return v.map(param)
  return v
}

export async function rows<T>(db: Db, text: string, params: unknown[] = []): Promise<T[]> {
  const result = (await db.unsafe(text, params.map(param) as any[])) as unknown as Record<string, unknown>[]
  // a plain array of plain rows (the driver's result array also carries count and command)
  const out: Record<string, unknown>[] = new Array(result.length)
  for (let i = 0; i < result.length; i++) {
    const row = result[i]
    for (const k in row) {
      const v = row[k]
      if (typeof v === 'string' && v.includes(MARK)) row[k] = unescapeText(v)
    }
    out[i] = row
  }
  return out as T[]
}

export async function one<T>(db: Db, text: string, params: unknown[] = []): Promise<T | null> {
  const result = await rows<T>(db, text, params)
  return result[0] ?? null
}

/** Rows changed by an INSERT, UPDATE or DELETE. */
export async function exec(db: Db, text: string, params: unknown[] = []): Promise<number> {
  const result = (await db.unsafe(text, params.map(param) as any[])) as unknown as { count: number }
  return Number(result.count ?? 0)
}
