import type { Database } from 'bun:sqlite'
import { createHash } from 'node:crypto'
import { MIGRATION_JOURNAL, MIGRATION_SQL } from './embedded-migrations.ts'

/**
 * Applies pending embedded migrations in one transaction. Bookkeeping uses drizzle's own
 * `__drizzle_migrations` table and rules (a migration is applied when its journal time is newer than
 * the last applied one), so drizzle-kit sees the same state.
 */
export function migrate(db: Database): number {
  db.run(`CREATE TABLE IF NOT EXISTS __drizzle_migrations (id INTEGER PRIMARY KEY AUTOINCREMENT, hash text NOT NULL, created_at numeric)`)
  const last = db.query<{ created_at: number }, []>(`SELECT created_at FROM __drizzle_migrations ORDER BY created_at DESC LIMIT 1`).get()
  const pending = MIGRATION_JOURNAL.entries.filter((e) => !last || Number(last.created_at) < e.when)
  if (pending.length === 0) return 0
  db.transaction(() => {
    for (const entry of pending) {
      const sql = MIGRATION_SQL[entry.tag]
      if (sql === undefined) throw new Error(`migration ${entry.tag} is in the journal but not embedded`)
      for (const statement of sql.split('--> statement-breakpoint')) {
        if (statement.trim()) db.run(statement)
      }
      db.run(`INSERT INTO __drizzle_migrations (hash, created_at) VALUES (?, ?)`, [
        createHash('sha256').update(sql).digest('hex'),
        entry.when,
      ])
    }
  })()
  return pending.length
}
