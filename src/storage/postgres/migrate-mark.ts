/**
 * The mark an unfinished `relay migrate` leaves in its target: a relay_state row written before the
 * first row is copied and removed once every row and blob is verified. Instances refuse to start on a
 * database that holds it (half a relay's data would look like data loss to its agents); running
 * `relay migrate` again finishes the copy (it skips what is there) and removes the mark.
 */
import type { SQL } from 'bun'

export const MIGRATE_MARK_KEY = 'migrate.unfinished'

export interface MigrateMark {
  /** When the copy started (ISO time) and from where. */
  started_at: string
  source: string
}

export async function setMigrateMark(sql: SQL, mark: MigrateMark): Promise<void> {
  await sql.unsafe('INSERT INTO relay_state (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value', [MIGRATE_MARK_KEY, JSON.stringify(mark)])
}

export async function clearMigrateMark(sql: SQL): Promise<void> {
  await sql.unsafe('DELETE FROM relay_state WHERE key = $1', [MIGRATE_MARK_KEY])
}

export async function readMigrateMark(sql: SQL): Promise<MigrateMark | null> {
  const rows: { value: string }[] = await sql.unsafe('SELECT value FROM relay_state WHERE key = $1', [MIGRATE_MARK_KEY])
  if (!rows[0]) return null
  try {
    return JSON.parse(rows[0].value) as MigrateMark
  } catch {
    return { started_at: 'unknown', source: 'unknown' }
  }
}
