import type { Database, Statement } from 'bun:sqlite'
import type { BlobRecord } from '../../services/models/records.ts'
import type { BlobRecordStore } from '../../services/ports.ts'

const COLUMNS = `blob_id AS blobId, owner_key AS ownerKey, hash, size_bytes AS sizeBytes, content_type AS contentType,
  created_at AS createdAt, expires_at AS expiresAt`

/** Blob records and the bookkeeping of their contents, on one connection. */
export class SqliteBlobRecordStore implements BlobRecordStore {
  private readonly insertStmt: Statement<unknown, [string, string, string, number, string, number, number]>
  private readonly byId: Statement<BlobRecord, [string]>
  private readonly ownedByHashStmt: Statement<BlobRecord, [string, string, number]>
  private readonly usageStmt: Statement<{ used: number | null; largest: number | null }, [string, number]>
  private readonly totalStmt: Statement<{ used: number | null }, [number]>
  private readonly readableStmt: Statement<BlobRecord, [{ id: string; who: string; now: number }]>
  private readonly referencedStmt: Statement<{ one: number }, [string, number]>
  private readonly deleteStmt: Statement<unknown, [string]>
  private readonly extendStmt: Statement<unknown, [number, string, string, number]>
  private readonly ownedStmt: Statement<BlobRecord, [string, string, number]>
  private readonly sweepStmt: Statement<{ hash: string }, [number, number, number]>
  private readonly removeOwnedStmt: Statement<{ hash: string }, [string, number]>
  private readonly storedStmt: Statement<{ files: number; bytes: number | null }, []>
  private readonly contentStmt: Statement<{ state: string; updatedAt: number }, [string]>
  private readonly claimInsertStmt: Statement<unknown, [string, number, number, number]>
  private readonly claimUpdateStmt: Statement<unknown, [number, number, string]>
  private readonly settleStmt: Statement<unknown, [string]>
  private readonly namedStmt: Statement<{ one: number }, [string]>
  private readonly markInsertStmt: Statement<unknown, [string, number, number]>
  private readonly markUpdateStmt: Statement<unknown, [number, string, number]>
  private readonly forgetStmt: Statement<unknown, [string]>
  private readonly markedStmt: Statement<{ hash: string }, [number]>

  constructor(db: Database) {
    this.insertStmt = db.prepare(`INSERT INTO blobs (blob_id, owner_key, hash, size_bytes, content_type, created_at, expires_at)
      VALUES (?, ?, ?, ?, ?, ?, ?)`)
    this.byId = db.prepare(`SELECT ${COLUMNS} FROM blobs WHERE blob_id = ?`)
    this.ownedByHashStmt = db.prepare(`SELECT ${COLUMNS} FROM blobs WHERE owner_key = ? AND hash = ? AND expires_at > ?
      ORDER BY expires_at DESC LIMIT 1`)
    this.usageStmt = db.prepare(`SELECT sum(size_bytes) AS used, max(size_bytes) AS largest FROM blobs WHERE owner_key = ? AND expires_at > ?`)
    this.totalStmt = db.prepare(`SELECT sum(size_bytes) AS used FROM blobs WHERE expires_at > ?`)
    // the owner, or a party of an unexpired message that attaches it (message_blobs rows live as long as their message)
    this.readableStmt = db.prepare(`SELECT ${COLUMNS} FROM blobs b WHERE b.blob_id = $id AND b.expires_at > $now AND (
        b.owner_key = $who OR EXISTS (
          SELECT 1 FROM message_blobs mb JOIN messages m ON m.message_id = mb.message_id
          WHERE mb.blob_id = b.blob_id AND mb.expires_at > $now AND (m.sender_key = $who OR m.recipient_key = $who)))`)
    this.referencedStmt = db.prepare(`SELECT 1 AS one FROM message_blobs WHERE blob_id = ? AND expires_at > ? LIMIT 1`)
    this.deleteStmt = db.prepare(`DELETE FROM blobs WHERE blob_id = ?`)
    this.extendStmt = db.prepare(`UPDATE blobs SET expires_at = max(expires_at, ?) WHERE blob_id = ? AND owner_key = ? AND expires_at > ?`)
    this.ownedStmt = db.prepare(`SELECT ${COLUMNS} FROM blobs
      WHERE blob_id IN (SELECT value FROM json_each(?)) AND owner_key = ? AND expires_at > ?`)
    this.sweepStmt = db.prepare(`DELETE FROM blobs WHERE rowid IN (
        SELECT rowid FROM blobs WHERE expires_at <= ?
          AND NOT EXISTS (SELECT 1 FROM message_blobs mb WHERE mb.blob_id = blobs.blob_id AND mb.expires_at > ?)
        ORDER BY expires_at LIMIT ?)
      RETURNING hash`)
    this.removeOwnedStmt = db.prepare(`DELETE FROM blobs WHERE owner_key = ? AND NOT EXISTS (
        SELECT 1 FROM message_blobs mb WHERE mb.blob_id = blobs.blob_id AND mb.expires_at > ?)
      RETURNING hash`)
    this.storedStmt = db.prepare(`SELECT count(*) AS files, sum(size) AS bytes FROM (SELECT max(size_bytes) AS size FROM blobs GROUP BY hash)`)
    this.contentStmt = db.prepare(`SELECT state, updated_at AS updatedAt FROM blob_contents WHERE hash = ?`)
    this.claimInsertStmt = db.prepare(`INSERT INTO blob_contents (hash, size_bytes, state, claimed_at, updated_at) VALUES (?1, ?2, 'live', ?3, ?4)`)
    this.claimUpdateStmt = db.prepare(`UPDATE blob_contents SET state = 'live', claimed_at = ?1, updated_at = ?2 WHERE hash = ?3`)
    this.settleStmt = db.prepare(`UPDATE blob_contents SET claimed_at = 0 WHERE hash = ? AND state = 'live'`)
    this.namedStmt = db.prepare(`SELECT 1 AS one FROM blobs WHERE hash = ? LIMIT 1`)
    this.markInsertStmt = db.prepare(`INSERT INTO blob_contents (hash, size_bytes, state, claimed_at, updated_at) VALUES (?1, 0, 'deleting', ?2, ?3)`)
    this.markUpdateStmt = db.prepare(`UPDATE blob_contents SET state = 'deleting', updated_at = ?1
      WHERE hash = ?2 AND state = 'live' AND claimed_at <= ?3`)
    this.forgetStmt = db.prepare(`DELETE FROM blob_contents WHERE hash = ? AND state = 'deleting'`)
    this.markedStmt = db.prepare(`SELECT hash FROM blob_contents WHERE state = 'deleting' ORDER BY updated_at LIMIT ?`)
  }

  async insert(r: BlobRecord): Promise<void> {
    this.insertStmt.run(r.blobId, r.ownerKey, r.hash, r.sizeBytes, r.contentType, r.createdAt, r.expiresAt)
  }

  async find(blobId: string): Promise<BlobRecord | null> {
    return this.byId.get(blobId)
  }

  async ownedByHash(ownerKey: string, hashHex: string, now: number): Promise<BlobRecord | null> {
    return this.ownedByHashStmt.get(ownerKey, hashHex, now)
  }

  async usage(ownerKey: string, now: number): Promise<{ usedBytes: number; largestBytes: number }> {
    const row = this.usageStmt.get(ownerKey, now)
    return { usedBytes: row?.used ?? 0, largestBytes: row?.largest ?? 0 }
  }

  async totalUsage(now: number): Promise<number> {
    return this.totalStmt.get(now)?.used ?? 0
  }

  async readableBy(blobId: string, key: string, now: number): Promise<BlobRecord | null> {
    return this.readableStmt.get({ id: blobId, who: key, now })
  }

  async isReferenced(blobId: string, now: number): Promise<boolean> {
    return this.referencedStmt.get(blobId, now) !== null
  }

  async delete(blobId: string): Promise<boolean> {
    return this.deleteStmt.run(blobId).changes > 0
  }

  async extendExpiry(blobId: string, ownerKey: string, expiresAt: number, now: number): Promise<boolean> {
    return this.extendStmt.run(expiresAt, blobId, ownerKey, now).changes > 0
  }

  async ownedAmong(blobIds: readonly string[], ownerKey: string, now: number): Promise<BlobRecord[]> {
    if (blobIds.length === 0) return []
    return this.ownedStmt.all(JSON.stringify(blobIds), ownerKey, now)
  }

  async removeExpiredBatch(now: number, limit: number): Promise<string[]> {
    return this.sweepStmt.all(now, now, limit).map((r) => r.hash)
  }

  async removeOwnedUnreferenced(ownerKey: string, now: number): Promise<string[]> {
    return this.removeOwnedStmt.all(ownerKey, now).map((r) => r.hash)
  }

  async storedContents(): Promise<{ files: number; bytes: number }> {
    const row = this.storedStmt.get()
    return { files: row?.files ?? 0, bytes: row?.bytes ?? 0 }
  }

  async claimContent(hashHex: string, sizeBytes: number, now: number, staleDeletingBefore: number): Promise<boolean> {
    const row = this.contentStmt.get(hashHex)
    if (!row) {
      this.claimInsertStmt.run(hashHex, sizeBytes, now, now)
      return true
    }
    // a cleanup is removing these bytes: wait for it, unless it stopped half way long ago
    if (row.state === 'deleting' && row.updatedAt > staleDeletingBefore) return false
    this.claimUpdateStmt.run(now, now, hashHex)
    return true
  }

  async settleContent(hashHex: string): Promise<void> {
    this.settleStmt.run(hashHex)
  }

  async markContentDeleting(hashHex: string, claimedBefore: number, now: number): Promise<boolean> {
    if (this.namedStmt.get(hashHex)) return false
    const row = this.contentStmt.get(hashHex)
    if (!row) {
      // bytes nobody ever claimed (left by a crash or an older version): removable at once
      this.markInsertStmt.run(hashHex, now, now)
      return true
    }
    return this.markUpdateStmt.run(now, hashHex, claimedBefore).changes > 0
  }

  async forgetContent(hashHex: string): Promise<void> {
    this.forgetStmt.run(hashHex)
  }

  async contentsMarkedDeleting(limit: number): Promise<string[]> {
    return this.markedStmt.all(limit).map((r) => r.hash)
  }

  async contentKnown(hashHex: string): Promise<boolean> {
    return this.contentStmt.get(hashHex) !== null || this.namedStmt.get(hashHex) !== null
  }
}
