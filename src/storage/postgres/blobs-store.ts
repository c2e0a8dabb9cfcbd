import type { BlobRecord } from '../../services/models/records.ts'
import type { BlobRecordStore } from '../../services/ports.ts'
import { exec, one, rows, type Db } from './db.ts'

const COLUMNS = `blob_id AS "blobId", owner_key AS "ownerKey", hash, size_bytes::float8 AS "sizeBytes", content_type AS "contentType",
  created_at::float8 AS "createdAt", expires_at::float8 AS "expiresAt"`

/**
 * Blob records and the bookkeeping of their contents. Where SQLite relied on its single writer, the
 * content rows are locked (`FOR UPDATE`) while a claim or a removal mark is decided.
 */
export class PgBlobRecordStore implements BlobRecordStore {
  constructor(private readonly db: Db) {}

  async insert(r: BlobRecord): Promise<void> {
    await exec(
      this.db,
      `INSERT INTO blobs (blob_id, owner_key, hash, size_bytes, content_type, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
      [r.blobId, r.ownerKey, r.hash, r.sizeBytes, r.contentType, r.createdAt, r.expiresAt],
    )
  }

  async find(blobId: string): Promise<BlobRecord | null> {
    return one<BlobRecord>(this.db, `SELECT ${COLUMNS} FROM blobs WHERE blob_id = $1`, [blobId])
  }

  /**
   * The owner's record of this content. It starts an upload's decision: in a transaction a lock on the
   * owner's key makes two uploads of one owner take turns until commit (as SQLite's single writer does),
   * so identical bytes make one record and the quota read by `usage` cannot be passed.
   */
  async ownedByHash(ownerKey: string, hashHex: string, now: number): Promise<BlobRecord | null> {
    await this.lockOwner(ownerKey)
    return one<BlobRecord>(
      this.db,
      `SELECT ${COLUMNS} FROM blobs WHERE owner_key = $1 AND hash = $2 AND expires_at > $3 ORDER BY expires_at DESC LIMIT 1`,
      [ownerKey, hashHex, now],
    )
  }

  private async lockOwner(ownerKey: string): Promise<void> {
    await exec(this.db, 'SELECT pg_advisory_xact_lock(hashtext($1))', [`relay.blobs:${ownerKey}`])
  }

  async usage(ownerKey: string, now: number): Promise<{ usedBytes: number; largestBytes: number }> {
    await this.lockOwner(ownerKey)
    const row = await one<{ used: number | null; largest: number | null }>(
      this.db,
      `SELECT sum(size_bytes)::float8 AS used, max(size_bytes)::float8 AS largest FROM blobs WHERE owner_key = $1 AND expires_at > $2`,
      [ownerKey, now],
    )
    return { usedBytes: row?.used ?? 0, largestBytes: row?.largest ?? 0 }
  }

  /** Every owner's bytes; in a transaction, uploads of all owners take turns from here to commit (the relay-wide quota). */
  async totalUsage(now: number): Promise<number> {
    await exec(this.db, 'SELECT pg_advisory_xact_lock(hashtext($1))', ['relay.blobs.total'])
    return (await one<{ used: number | null }>(this.db, `SELECT sum(size_bytes)::float8 AS used FROM blobs WHERE expires_at > $1`, [now]))?.used ?? 0
  }

  async readableBy(blobId: string, key: string, now: number): Promise<BlobRecord | null> {
    return one<BlobRecord>(
      this.db,
      `SELECT ${COLUMNS} FROM blobs b WHERE b.blob_id = $1 AND b.expires_at > $3 AND (
         b.owner_key = $2 OR EXISTS (
           SELECT 1 FROM message_blobs mb JOIN messages m ON m.message_id = mb.message_id
           WHERE mb.blob_id = b.blob_id AND mb.expires_at > $3 AND (m.sender_key = $2 OR m.recipient_key = $2)))`,
      [blobId, key, now],
    )
  }

  /**
   * Whether an unexpired message attaches the blob. The blob's row is locked first, and the links are
   * read by a statement of their own after it: a send attaching the blob holds that row (it extends the
   * blob's expiry) until it commits, so its links are seen here — a delete in the same transaction
   * cannot remove a blob that a send has just attached (SQLite's single writer gives the same order).
   */
  async isReferenced(blobId: string, now: number): Promise<boolean> {
    await exec(this.db, `SELECT 1 FROM blobs WHERE blob_id = $1 FOR UPDATE`, [blobId])
    return (await one(this.db, `SELECT 1 AS one FROM message_blobs WHERE blob_id = $1 AND expires_at > $2 LIMIT 1`, [blobId, now])) !== null
  }

  async delete(blobId: string): Promise<boolean> {
    return (await exec(this.db, `DELETE FROM blobs WHERE blob_id = $1`, [blobId])) > 0
  }

  async extendExpiry(blobId: string, ownerKey: string, expiresAt: number, now: number): Promise<boolean> {
    const changed = await exec(
      this.db,
      `UPDATE blobs SET expires_at = greatest(expires_at, $1) WHERE blob_id = $2 AND owner_key = $3 AND expires_at > $4`,
      [expiresAt, blobId, ownerKey, now],
    )
    return changed > 0
  }

  async ownedAmong(blobIds: readonly string[], ownerKey: string, now: number): Promise<BlobRecord[]> {
    if (blobIds.length === 0) return []
    return rows<BlobRecord>(this.db, `SELECT ${COLUMNS} FROM blobs WHERE blob_id = ANY($1::text[]) AND owner_key = $2 AND expires_at > $3`, [
      [...blobIds],
      ownerKey,
      now,
    ])
  }

  async removeExpiredBatch(now: number, limit: number): Promise<string[]> {
    const removed = await rows<{ hash: string }>(
      this.db,
      `DELETE FROM blobs WHERE blob_id IN (
         SELECT blob_id FROM blobs WHERE expires_at <= $1
           AND NOT EXISTS (SELECT 1 FROM message_blobs mb WHERE mb.blob_id = blobs.blob_id AND mb.expires_at > $1)
         ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)
       RETURNING hash`,
      [now, limit],
    )
    return removed.map((r) => r.hash)
  }

  async removeOwnedUnreferenced(ownerKey: string, now: number): Promise<string[]> {
    const removed = await rows<{ hash: string }>(
      this.db,
      `DELETE FROM blobs WHERE owner_key = $1 AND NOT EXISTS (
         SELECT 1 FROM message_blobs mb WHERE mb.blob_id = blobs.blob_id AND mb.expires_at > $2)
       RETURNING hash`,
      [ownerKey, now],
    )
    return removed.map((r) => r.hash)
  }

  async storedContents(): Promise<{ files: number; bytes: number }> {
    const row = await one<{ files: number; bytes: number | null }>(
      this.db,
      `SELECT count(*)::float8 AS files, sum(size)::float8 AS bytes FROM (SELECT max(size_bytes) AS size FROM blobs GROUP BY hash) s`,
    )
    return { files: row?.files ?? 0, bytes: row?.bytes ?? 0 }
  }

  private content(hashHex: string, lock: boolean): Promise<{ state: string; updatedAt: number; claimedAt: number } | null> {
    return one(
      this.db,
      `SELECT state, updated_at::float8 AS "updatedAt", claimed_at::float8 AS "claimedAt" FROM blob_contents WHERE hash = $1${lock ? ' FOR UPDATE' : ''}`,
      [hashHex],
    )
  }

  async claimContent(hashHex: string, sizeBytes: number, now: number, staleDeletingBefore: number): Promise<boolean> {
    const inserted = await exec(
      this.db,
      `INSERT INTO blob_contents (hash, size_bytes, state, claimed_at, updated_at) VALUES ($1, $2, 'live', $3, $3) ON CONFLICT (hash) DO NOTHING`,
      [hashHex, sizeBytes, now],
    )
    if (inserted > 0) return true
    const row = await this.content(hashHex, true)
    // a cleanup is removing these bytes: wait for it, unless it stopped half way long ago
    if (row && row.state === 'deleting' && row.updatedAt > staleDeletingBefore) return false
    if (!row) return this.claimContent(hashHex, sizeBytes, now, staleDeletingBefore)
    await exec(this.db, `UPDATE blob_contents SET state = 'live', claimed_at = $1, updated_at = $1 WHERE hash = $2`, [now, hashHex])
    return true
  }

  async settleContent(hashHex: string): Promise<void> {
    await exec(this.db, `UPDATE blob_contents SET claimed_at = 0 WHERE hash = $1 AND state = 'live'`, [hashHex])
  }

  async markContentDeleting(hashHex: string, claimedBefore: number, now: number): Promise<boolean> {
    // the content row is locked first, so a concurrent claim waits for this decision (or this one for it)
    const row = await this.content(hashHex, true)
    if (await this.named(hashHex)) return false
    if (!row) {
      // bytes nobody ever claimed (left by a crash or an older version): removable at once
      const inserted = await exec(
        this.db,
        `INSERT INTO blob_contents (hash, size_bytes, state, claimed_at, updated_at) VALUES ($1, 0, 'deleting', $2, $2) ON CONFLICT (hash) DO NOTHING`,
        [hashHex, now],
      )
      return inserted > 0
    }
    const changed = await exec(
      this.db,
      `UPDATE blob_contents SET state = 'deleting', updated_at = $1 WHERE hash = $2 AND state = 'live' AND claimed_at <= $3`,
      [now, hashHex, claimedBefore],
    )
    return changed > 0
  }

  async forgetContent(hashHex: string): Promise<void> {
    await exec(this.db, `DELETE FROM blob_contents WHERE hash = $1 AND state = 'deleting'`, [hashHex])
  }

  async contentsMarkedDeleting(limit: number): Promise<string[]> {
    return (await rows<{ hash: string }>(this.db, `SELECT hash FROM blob_contents WHERE state = 'deleting' ORDER BY updated_at LIMIT $1`, [limit])).map((r) => r.hash)
  }

  async contentKnown(hashHex: string): Promise<boolean> {
    return (await this.content(hashHex, false)) !== null || (await this.named(hashHex))
  }

  private async named(hashHex: string): Promise<boolean> {
    return (await one(this.db, `SELECT 1 AS one FROM blobs WHERE hash = $1 LIMIT 1`, [hashHex])) !== null
  }
}
