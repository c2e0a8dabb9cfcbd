import type { Database, Statement } from 'bun:sqlite'
import type { StateStore } from '../../services/ports.ts'

/** relay_state: a few persisted numbers of the relay (sweep watermarks, probes). */
export class SqliteStateStore implements StateStore {
  private readonly getStmt: Statement<{ value: string }, [string]>
  private readonly setStmt: Statement<unknown, [string, string]>

  constructor(db: Database) {
    this.getStmt = db.prepare(`SELECT value FROM relay_state WHERE key = ?`)
    this.setStmt = db.prepare(`INSERT INTO relay_state (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`)
  }

  async getNumber(key: string): Promise<number | null> {
    const row = this.getStmt.get(key)
    return row ? Number(row.value) : null
  }

  async setNumber(key: string, value: number): Promise<void> {
    this.setStmt.run(key, String(value))
  }
}
