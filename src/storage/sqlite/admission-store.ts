import type { Database, Statement } from 'bun:sqlite'
import type { AdmissionStore } from '../../services/ports.ts'

type Entry = { publicKey: string; note: string | null; createdAt: number }

/** The operator's allowlist (table admitted_keys); its version is the latest change time. */
export class SqliteAdmissionStore implements AdmissionStore {
  private readonly findStmt: Statement<{ one: number }, [string]>
  private readonly insertStmt: Statement<unknown, [string, string | null, number]>
  private readonly deleteStmt: Statement<unknown, [string]>
  private readonly listStmt: Statement<Entry, []>
  private readonly versionGet: Statement<{ value: string }, []>
  private readonly versionBump: Statement<unknown, []>

  constructor(db: Database) {
    this.findStmt = db.prepare('SELECT 1 AS one FROM admitted_keys WHERE public_key = ?')
    this.insertStmt = db.prepare('INSERT INTO admitted_keys (public_key, note, created_at) VALUES (?, ?, ?) ON CONFLICT(public_key) DO NOTHING')
    this.deleteStmt = db.prepare('DELETE FROM admitted_keys WHERE public_key = ?')
    this.listStmt = db.prepare('SELECT public_key AS publicKey, note, created_at AS createdAt FROM admitted_keys ORDER BY created_at, public_key')
    this.versionGet = db.prepare(`SELECT value FROM relay_state WHERE key = 'admission.version'`)
    this.versionBump = db.prepare(`INSERT INTO relay_state (key, value) VALUES ('admission.version', '1')
      ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1`)
  }

  async isAllowed(publicKey: string): Promise<boolean> {
    return this.findStmt.get(publicKey) !== null
  }

  async allow(publicKey: string, note: string | null, now: number): Promise<boolean> {
    const added = this.insertStmt.run(publicKey, note, now).changes > 0
    if (added) this.versionBump.run()
    return added
  }

  async revoke(publicKey: string): Promise<boolean> {
    const removed = this.deleteStmt.run(publicKey).changes > 0
    if (removed) this.versionBump.run()
    return removed
  }

  async list(): Promise<Entry[]> {
    return this.listStmt.all()
  }

  async version(): Promise<number> {
    return Number(this.versionGet.get()?.value ?? 0)
  }
}
