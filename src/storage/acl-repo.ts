import type { Database, Statement } from 'bun:sqlite'
import type { Db } from './db.ts'

export interface AclRow {
  id: number
  ownerKey: string
  peerKey: string
  entryType: 'allow' | 'block'
  createdAt: number
  updatedAt: number
}

const COLUMNS = `id, owner_key AS ownerKey, peer_key AS peerKey, entry_type AS entryType, created_at AS createdAt, updated_at AS updatedAt`

/** ACL entries, one per (owner, peer). Methods take `now` from the caller; no rule lives here. */
export class AclRepo {
  private readonly client: Database
  private readonly byPair: Statement<AclRow, [string, string]>
  private readonly typeOf: Statement<{ entryType: 'allow' | 'block' }, [string, string]>
  private readonly listAll: Statement<AclRow, [string]>
  private readonly listType: Statement<AclRow, [string, string]>
  private readonly countOwner: Statement<{ n: number }, [string]>
  private readonly insertStmt: Statement<AclRow, [string, string, string, number, number]>
  private readonly updateStmt: Statement<unknown, [string, number, number]>
  private readonly deleteStmt: Statement<unknown, [string, string]>

  constructor(db: Db) {
    const c = (this.client = db.$client)
    this.byPair = c.prepare(`SELECT ${COLUMNS} FROM acl_entries WHERE owner_key = ? AND peer_key = ?`)
    this.typeOf = c.prepare(`SELECT entry_type AS entryType FROM acl_entries WHERE owner_key = ? AND peer_key = ?`)
    // ids grow with creation, so id order is creation order (and changing an entry keeps its place)
    this.listAll = c.prepare(`SELECT ${COLUMNS} FROM acl_entries WHERE owner_key = ? ORDER BY id DESC`)
    this.listType = c.prepare(`SELECT ${COLUMNS} FROM acl_entries WHERE owner_key = ? AND entry_type = ? ORDER BY id DESC`)
    this.countOwner = c.prepare(`SELECT count(*) AS n FROM acl_entries WHERE owner_key = ?`)
    this.insertStmt = c.prepare(
      `INSERT INTO acl_entries (owner_key, peer_key, entry_type, created_at, updated_at) VALUES (?, ?, ?, ?, ?) RETURNING ${COLUMNS}`,
    )
    this.updateStmt = c.prepare(`UPDATE acl_entries SET entry_type = ?, updated_at = ? WHERE id = ?`)
    this.deleteStmt = c.prepare(`DELETE FROM acl_entries WHERE owner_key = ? AND peer_key = ?`)
  }

  find(ownerKey: string, peerKey: string): AclRow | null {
    return this.byPair.get(ownerKey, peerKey)
  }

  /** The entry type `owner` set for `peer`, or null: the hot lookup of every send. */
  entryTypeFor(ownerKey: string, peerKey: string): 'allow' | 'block' | null {
    return this.typeOf.get(ownerKey, peerKey)?.entryType ?? null
  }

  list(ownerKey: string, entryType?: 'allow' | 'block'): AclRow[] {
    return entryType ? this.listType.all(ownerKey, entryType) : this.listAll.all(ownerKey)
  }

  count(ownerKey: string): number {
    return this.countOwner.get(ownerKey)?.n ?? 0
  }

  insert(ownerKey: string, peerKey: string, entryType: 'allow' | 'block', now: number): AclRow {
    return this.insertStmt.get(ownerKey, peerKey, entryType, now, now) as AclRow
  }

  setType(id: number, entryType: 'allow' | 'block', now: number): void {
    this.updateStmt.run(entryType, now, id)
  }

  /** Returns false when there was no entry. */
  delete(ownerKey: string, peerKey: string): boolean {
    return this.deleteStmt.run(ownerKey, peerKey).changes > 0
  }

  /** Runs `fn` in one write transaction (synchronous). */
  transaction<T>(fn: () => T): T {
    return this.client.transaction(fn).immediate()
  }
}
