import type { AclEntryType, AclRecord } from '../../services/models/records.ts'
import type { AclStore } from '../../services/ports.ts'
import { exec, one, rows, type Db } from './db.ts'

const COLUMNS = `id, owner_key AS "ownerKey", peer_key AS "peerKey", entry_type AS "entryType",
  created_at::float8 AS "createdAt", updated_at::float8 AS "updatedAt"`

/** ACL entries, one per (owner, peer); ids grow with creation, so id order is creation order. */
export class PgAclStore implements AclStore {
  constructor(private readonly db: Db) {}

  /** In a transaction, locks the owner's entries until commit (see count): a PUT decides on what it found. */
  async find(ownerKey: string, peerKey: string): Promise<AclRecord | null> {
    await this.lockOwner(ownerKey)
    return one<AclRecord>(this.db, `SELECT ${COLUMNS} FROM acl_entries WHERE owner_key = $1 AND peer_key = $2`, [ownerKey, peerKey])
  }

  async entryTypeFor(ownerKey: string, peerKey: string): Promise<AclEntryType | null> {
    const row = await one<{ entryType: AclEntryType }>(this.db, `SELECT entry_type AS "entryType" FROM acl_entries WHERE owner_key = $1 AND peer_key = $2`, [ownerKey, peerKey])
    return row?.entryType ?? null
  }

  async list(ownerKey: string, entryType?: AclEntryType): Promise<AclRecord[]> {
    return entryType
      ? rows<AclRecord>(this.db, `SELECT ${COLUMNS} FROM acl_entries WHERE owner_key = $1 AND entry_type = $2 ORDER BY id DESC`, [ownerKey, entryType])
      : rows<AclRecord>(this.db, `SELECT ${COLUMNS} FROM acl_entries WHERE owner_key = $1 ORDER BY id DESC`, [ownerKey])
  }

  private async lockOwner(ownerKey: string): Promise<void> {
    await exec(this.db, 'SELECT pg_advisory_xact_lock(hashtext($1))', [`relay.acl:${ownerKey}`])
  }

  /**
   * The owner's entries. In a transaction the count holds until it commits: a lock on the owner's key
   * makes a count-then-insert of two requests at the same moment take turns (as SQLite's single writer
   * does), so a limit checked on the count cannot be passed.
   */
  async count(ownerKey: string): Promise<number> {
    await this.lockOwner(ownerKey)
    return (await one<{ n: number }>(this.db, `SELECT count(*)::int AS n FROM acl_entries WHERE owner_key = $1`, [ownerKey]))?.n ?? 0
  }

  async insert(ownerKey: string, peerKey: string, entryType: AclEntryType, now: number): Promise<AclRecord> {
    return (await one<AclRecord>(
      this.db,
      `INSERT INTO acl_entries (owner_key, peer_key, entry_type, created_at, updated_at) VALUES ($1, $2, $3, $4, $4) RETURNING ${COLUMNS}`,
      [ownerKey, peerKey, entryType, now],
    )) as AclRecord
  }

  async setType(id: number, entryType: AclEntryType, now: number): Promise<void> {
    await exec(this.db, `UPDATE acl_entries SET entry_type = $1, updated_at = $2 WHERE id = $3`, [entryType, now, id])
  }

  async delete(ownerKey: string, peerKey: string): Promise<boolean> {
    return (await exec(this.db, `DELETE FROM acl_entries WHERE owner_key = $1 AND peer_key = $2`, [ownerKey, peerKey])) > 0
  }

  async removeOwnedBy(ownerKey: string): Promise<number> {
    return exec(this.db, `DELETE FROM acl_entries WHERE owner_key = $1`, [ownerKey])
  }
}
