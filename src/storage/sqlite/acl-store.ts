import type { Database, Statement } from 'bun:sqlite'
import type { AclEntryType, AclRecord } from '../../services/models/records.ts'
import type { AclStore } from '../../services/ports.ts'
import type { AclOwners } from './acl-owners.ts'

const COLUMNS = `id, owner_key AS ownerKey, peer_key AS peerKey, entry_type AS entryType, created_at AS createdAt, updated_at AS updatedAt`

/** ACL entries on one connection, one per (owner, peer). */
export class SqliteAclStore implements AclStore {
  private readonly byPair: Statement<AclRecord, [string, string]>
  private readonly typeOf: Statement<{ entryType: AclEntryType }, [string, string]>
  private readonly listAll: Statement<AclRecord, [string]>
  private readonly listType: Statement<AclRecord, [string, string]>
  private readonly countOwner: Statement<{ n: number }, [string]>
  private readonly insertStmt: Statement<AclRecord, [string, string, string, number, number]>
  private readonly updateStmt: Statement<unknown, [string, number, number]>
  private readonly deleteStmt: Statement<unknown, [string, string]>
  private readonly removeOwnerStmt: Statement<unknown, [string]>

  constructor(
    db: Database,
    private readonly owners: AclOwners,
  ) {
    this.byPair = db.prepare(`SELECT ${COLUMNS} FROM acl_entries WHERE owner_key = ? AND peer_key = ?`)
    this.typeOf = db.prepare(`SELECT entry_type AS entryType FROM acl_entries WHERE owner_key = ? AND peer_key = ?`)
    // ids grow with creation, so id order is creation order (and changing an entry keeps its place)
    this.listAll = db.prepare(`SELECT ${COLUMNS} FROM acl_entries WHERE owner_key = ? ORDER BY id DESC`)
    this.listType = db.prepare(`SELECT ${COLUMNS} FROM acl_entries WHERE owner_key = ? AND entry_type = ? ORDER BY id DESC`)
    this.countOwner = db.prepare(`SELECT count(*) AS n FROM acl_entries WHERE owner_key = ?`)
    this.insertStmt = db.prepare(
      `INSERT INTO acl_entries (owner_key, peer_key, entry_type, created_at, updated_at) VALUES (?, ?, ?, ?, ?) RETURNING ${COLUMNS}`,
    )
    this.updateStmt = db.prepare(`UPDATE acl_entries SET entry_type = ?, updated_at = ? WHERE id = ?`)
    this.deleteStmt = db.prepare(`DELETE FROM acl_entries WHERE owner_key = ? AND peer_key = ?`)
    this.removeOwnerStmt = db.prepare(`DELETE FROM acl_entries WHERE owner_key = ?`)
  }

  async find(ownerKey: string, peerKey: string): Promise<AclRecord | null> {
    return this.byPair.get(ownerKey, peerKey)
  }

  async entryTypeFor(ownerKey: string, peerKey: string): Promise<AclEntryType | null> {
    if (!this.owners.mayHave(ownerKey)) return null
    return this.typeOf.get(ownerKey, peerKey)?.entryType ?? null
  }

  async list(ownerKey: string, entryType?: AclEntryType): Promise<AclRecord[]> {
    return entryType ? this.listType.all(ownerKey, entryType) : this.listAll.all(ownerKey)
  }

  async count(ownerKey: string): Promise<number> {
    return this.countOwner.get(ownerKey)?.n ?? 0
  }

  async insert(ownerKey: string, peerKey: string, entryType: AclEntryType, now: number): Promise<AclRecord> {
    this.owners.add(ownerKey)
    return this.insertStmt.get(ownerKey, peerKey, entryType, now, now) as AclRecord
  }

  async setType(id: number, entryType: AclEntryType, now: number): Promise<void> {
    this.updateStmt.run(entryType, now, id)
  }

  async delete(ownerKey: string, peerKey: string): Promise<boolean> {
    return this.deleteStmt.run(ownerKey, peerKey).changes > 0
  }

  async removeOwnedBy(ownerKey: string): Promise<number> {
    return this.removeOwnerStmt.run(ownerKey).changes
  }
}
