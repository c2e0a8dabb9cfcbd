/**
 * What the PostgreSQL stores share: a handle to run statements on (the pool, or one transaction), and
 * two small helpers over Bun.SQL's `unsafe` with `$n` parameters. Times are bigint columns, which the
 * driver returns as strings: statements cast them to float8 (exact for millisecond times) when they
 * select them.
 */
import type { SQL } from 'bun'

export type Db = SQL

export async function rows<T>(db: Db, text: string, params: unknown[] = []): Promise<T[]> {
  // a plain array: the driver's result array also carries count and command
  return Array.from((await db.unsafe(text, params as any[])) as unknown as T[])
}

export async function one<T>(db: Db, text: string, params: unknown[] = []): Promise<T | null> {
  const result = await rows<T>(db, text, params)
  return result[0] ?? null
}

/** Rows changed by an INSERT, UPDATE or DELETE. */
export async function exec(db: Db, text: string, params: unknown[] = []): Promise<number> {
  const result = (await db.unsafe(text, params as any[])) as unknown as { count: number }
  return Number(result.count ?? 0)
}
