import type { AdmissionStore } from '../../services/ports.ts'
import { exec, one, rows, type Db } from './db.ts'

type Entry = { publicKey: string; note: string | null; createdAt: number }

/** The operator's allowlist (table admitted_keys); its version is a counter in relay_state. */
export class PgAdmissionStore implements AdmissionStore {
  constructor(private readonly db: Db) {}

  async isAllowed(publicKey: string): Promise<boolean> {
    return (await one(this.db, 'SELECT 1 AS one FROM admitted_keys WHERE public_key = $1', [publicKey])) !== null
  }

  async allow(publicKey: string, note: string | null, now: number): Promise<boolean> {
    const added = (await exec(this.db, 'INSERT INTO admitted_keys (public_key, note, created_at) VALUES ($1, $2, $3) ON CONFLICT (public_key) DO NOTHING', [publicKey, note, now])) > 0
    if (added) await this.bump()
    return added
  }

  async revoke(publicKey: string): Promise<boolean> {
    const removed = (await exec(this.db, 'DELETE FROM admitted_keys WHERE public_key = $1', [publicKey])) > 0
    if (removed) await this.bump()
    return removed
  }

  async list(): Promise<Entry[]> {
    return rows<Entry>(this.db, 'SELECT public_key AS "publicKey", note, created_at::float8 AS "createdAt" FROM admitted_keys ORDER BY created_at, public_key')
  }

  async version(): Promise<number> {
    return Number((await one<{ value: string }>(this.db, `SELECT value FROM relay_state WHERE key = 'admission.version'`))?.value ?? 0)
  }

  private async bump(): Promise<void> {
    await exec(this.db, `INSERT INTO relay_state (key, value) VALUES ('admission.version', '1')
      ON CONFLICT (key) DO UPDATE SET value = (relay_state.value::bigint + 1)::text`)
  }
}
