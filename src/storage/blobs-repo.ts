import type { Database, Statement } from 'bun:sqlite'
import type { Db } from './db.ts'
import type { blobs } from './schema.ts'

export type BlobRow = typeof blobs.$inferSelect

const COLUMNS = `blob_id AS blobId, owner_key AS ownerKey, hash, size_bytes AS sizeBytes, content_type AS contentType,
  created_at AS createdAt, expires_at AS expiresAt`

/**
 * Blob records (SPEC §6): one per owner and upload, naming content by its SHA-256. Methods take `now`
 * from the caller; the rules (who may read, quotas, lifetimes) live in the blobs service.
 */
export class BlobsRepo {
  readonly client: Database
  private readonly insertStmt: Statement<unknown, [string, string, string, number, string, number, number]>
  private readonly byId: Statement<BlobRow, [string]>
  private readonly ownedByHashStmt: Statement<BlobRow, [string, string, number]>
  private readonly usageStmt: Statement<{ used: number | null; largest: number | null }, [string, number]>
  private readonly readableStmt: Statement<BlobRow, [{ id: string; who: string; now: number }]>
  private readonly referencedStmt: Statement<{ one: number }, [string, number]>
  private readonly deleteStmt: Statement<unknown, [string]>
  private readonly extendStmt: Statement<unknown, [number, string, string, number]>
  private readonly ownedStmt: Statement<BlobRow, [string, string, number]>
  private readonly sweepStmt: Statement<{ hash: string }, [number, number, number]>
  private readonly hashUsedStmt: Statement<{ one: number }, [string]>
  private readonly storedStmt: Statement<{ files: number; bytes: number | null }, []>

  constructor(db: Db) {
    const c = (this.client = db.$client)
    this.insertStmt = c.prepare(`INSERT INTO blobs (blob_id, owner_key, hash, size_bytes, content_type, created_at, expires_at)
      VALUES (?, ?, ?, ?, ?, ?, ?)`)
    this.byId = c.prepare(`SELECT ${COLUMNS} FROM blobs WHERE blob_id = ?`)
    this.ownedByHashStmt = c.prepare(`SELECT ${COLUMNS} FROM blobs WHERE owner_key = ? AND hash = ? AND expires_at > ?
      ORDER BY expires_at DESC LIMIT 1`)
    this.usageStmt = c.prepare(`SELECT sum(size_bytes) AS used, max(size_bytes) AS largest FROM blobs WHERE owner_key = ? AND expires_at > ?`)
    // the owner, or a party of an unexpired message that attaches it (message_blobs rows live as long as their message)
    this.readableStmt = c.prepare(`SELECT ${COLUMNS} FROM blobs b WHERE b.blob_id = $id AND b.expires_at > $now AND (
        b.owner_key = $who OR EXISTS (
          SELECT 1 FROM message_blobs mb JOIN messages m ON m.message_id = mb.message_id
          WHERE mb.blob_id = b.blob_id AND mb.expires_at > $now AND (m.sender_key = $who OR m.recipient_key = $who)))`)
    this.referencedStmt = c.prepare(`SELECT 1 AS one FROM message_blobs WHERE blob_id = ? AND expires_at > ? LIMIT 1`)
    this.deleteStmt = c.prepare(`DELETE FROM blobs WHERE blob_id = ?`)
    this.extendStmt = c.prepare(`UPDATE blobs SET expires_at = max(expires_at, ?) WHERE blob_id = ? AND owner_key = ? AND expires_at > ?`)
    this.ownedStmt = c.prepare(`SELECT ${COLUMNS} FROM blobs
      WHERE blob_id IN (SELECT value FROM json_each(?)) AND owner_key = ? AND expires_at > ?`)
    this.sweepStmt = c.prepare(`DELETE FROM blobs WHERE rowid IN (
        SELECT rowid FROM blobs WHERE expires_at <= ?
          AND NOT EXISTS (SELECT 1 FROM message_blobs mb WHERE mb.blob_id = blobs.blob_id AND mb.expires_at > ?)
        ORDER BY expires_at LIMIT ?)
      RETURNING hash`)
    this.hashUsedStmt = c.prepare(`SELECT 1 AS one FROM blobs WHERE hash = ? LIMIT 1`)
    this.storedStmt = c.prepare(`SELECT count(*) AS files, sum(size) AS bytes FROM (SELECT max(size_bytes) AS size FROM blobs GROUP BY hash)`)
  }

  insert(row: BlobRow): void {
    this.insertStmt.run(row.blobId, row.ownerKey, row.hash, row.sizeBytes, row.contentType, row.createdAt, row.expiresAt)
  }

  /** A record whatever its state; null when there is none. */
  find(blobId: string): BlobRow | null {
    return this.byId.get(blobId)
  }

  /** The owner's unexpired record of this content (the latest-expiring one), or null. */
  ownedByHash(ownerKey: string, hashHex: string, now: number): BlobRow | null {
    return this.ownedByHashStmt.get(ownerKey, hashHex, now)
  }

  /** Bytes of the owner's unexpired records (what counts against the quota) and the largest of them. */
  usage(ownerKey: string, now: number): { usedBytes: number; largestBytes: number } {
    const row = this.usageStmt.get(ownerKey, now)
    return { usedBytes: row?.used ?? 0, largestBytes: row?.largest ?? 0 }
  }

  /** The unexpired record if `key` may read it (owner or party of an unexpired message attaching it). */
  readableBy(blobId: string, key: string, now: number): BlobRow | null {
    return this.readableStmt.get({ id: blobId, who: key, now })
  }

  /** Whether an unexpired message attaches the blob. */
  isReferenced(blobId: string, now: number): boolean {
    return this.referencedStmt.get(blobId, now) !== null
  }

  delete(blobId: string): boolean {
    return this.deleteStmt.run(blobId).changes > 0
  }

  /** Moves the record's expiry to `expiresAt` unless it is already later; false if it is gone, not the owner's, or expired. */
  extendExpiry(blobId: string, ownerKey: string, expiresAt: number, now: number): boolean {
    return this.extendStmt.run(expiresAt, blobId, ownerKey, now).changes > 0
  }

  /** The unexpired records among `blobIds` that `ownerKey` owns. */
  ownedAmong(blobIds: readonly string[], ownerKey: string, now: number): BlobRow[] {
    if (blobIds.length === 0) return []
    return this.ownedStmt.all(JSON.stringify(blobIds), ownerKey, now)
  }

  /**
   * Removes up to `limit` records expired at `now` that no unexpired message references; returns the
   * hashes they named (their files may now be unused). Call inside a transaction.
   */
  removeExpiredBatch(now: number, limit: number): string[] {
    return this.sweepStmt.all(now, now, limit).map((r) => r.hash)
  }

  /** Whether any record, expired or not, still names this content. */
  hashInUse(hashHex: string): boolean {
    return this.hashUsedStmt.get(hashHex) !== null
  }

  /** Distinct contents named by records and their bytes: what the blob directory should hold. */
  storedContents(): { files: number; bytes: number } {
    const row = this.storedStmt.get()
    return { files: row?.files ?? 0, bytes: row?.bytes ?? 0 }
  }

  /** Runs `fn` in one write transaction (synchronous; never await inside). */
  transaction<T>(fn: () => T): T {
    return this.client.transaction(fn).immediate()
  }
}
