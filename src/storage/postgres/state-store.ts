import type { StateStore } from '../../services/ports.ts'
import { exec, one, type Db } from './db.ts'

/** relay_state: a few persisted numbers of the relay (sweep watermarks, probes). */
export class PgStateStore implements StateStore {
  constructor(private readonly db: Db) {}

  async getNumber(key: string): Promise<number | null> {
    const row = await one<{ value: string }>(this.db, 'SELECT value FROM relay_state WHERE key = $1', [key])
    return row ? Number(row.value) : null
  }

  async setNumber(key: string, value: number): Promise<void> {
    await exec(this.db, 'INSERT INTO relay_state (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value', [key, String(value)])
  }
}
