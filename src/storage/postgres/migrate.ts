import type { SQL } from 'bun'
import { createHash } from 'node:crypto'
import { MIGRATION_JOURNAL, MIGRATION_SQL } from './embedded-migrations.ts'

/** Any fixed number: the advisory lock that serializes start-up migrations of every instance. */
const MIGRATION_LOCK = 7_262_001

/**
 * Applies pending embedded migrations in one transaction, under a transaction-scoped advisory lock so
 * that instances starting together apply them once. Bookkeeping uses drizzle's own
 * `drizzle.__drizzle_migrations` table and rules (a migration is applied when its journal time is
 * newer than the last applied one), so drizzle-kit sees the same state. Returns how many were applied.
 */
export async function migrate(sql: SQL): Promise<number> {
  return sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`
    await tx.unsafe('CREATE SCHEMA IF NOT EXISTS drizzle')
    await tx.unsafe('CREATE TABLE IF NOT EXISTS drizzle.__drizzle_migrations (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at bigint)')
    const [last] = await tx.unsafe('SELECT created_at::float8 AS "createdAt" FROM drizzle.__drizzle_migrations ORDER BY created_at DESC LIMIT 1')
    const pending = MIGRATION_JOURNAL.entries.filter((e) => !last || Number(last.createdAt) < e.when)
    for (const entry of pending) {
      const text = MIGRATION_SQL[entry.tag]
      if (text === undefined) throw new Error(`migration ${entry.tag} is in the journal but not embedded`)
      for (const statement of text.split('--> statement-breakpoint')) {
        if (statement.trim()) await tx.unsafe(statement)
      }
      await tx.unsafe('INSERT INTO drizzle.__drizzle_migrations (hash, created_at) VALUES ($1, $2)', [
        createHash('sha256').update(text).digest('hex'),
        entry.when,
      ])
    }
    return pending.length
  })
}
