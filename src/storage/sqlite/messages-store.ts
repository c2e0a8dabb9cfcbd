import type { Database, Statement } from 'bun:sqlite'
import type { InboxFilter, MessagePosition, MessageRecord, MessageStatus } from '../../services/models/records.ts'
import type { ExpireBatchResult, MessageStore, SweepCursor } from '../../services/ports.ts'
import { isUniqueViolation } from './errors.ts'

interface ExpiringRow {
  rowid: number
  messageId: string
  status: MessageStatus
  expiresAt: number
}

const COLUMNS = `message_id AS messageId, sender_key AS senderKey, recipient_key AS recipientKey,
  content_type AS contentType, body, attachments, thread_id AS threadId, in_reply_to AS inReplyTo,
  metadata, status, created_at AS createdAt, expires_at AS expiresAt, delivered_at AS deliveredAt`

/** Before every real position: lets one statement serve first pages and later pages alike. */
const START: MessagePosition = { createdAt: -1, messageId: '' }

/**
 * Which rows each status filter sees at `now` (params :now, :cutoff = now − expired retention).
 * Expiry is decided by time, not by the sweep: a `sent` row past `expires_at` already counts as expired,
 * a `delivered` one as removed, and an expired envelope past retention as removed (docs/protocol.md §4.6).
 */
const STATUS_WHERE: Record<MessageStatus, string> = {
  sent: `status = 'sent' AND expires_at > $now`,
  delivered: `status = 'delivered' AND expires_at > $now`,
  expired: `status IN ('sent', 'expired') AND +expires_at <= $now AND +expires_at > $cutoff`,
}
/** Rows that exist for readers at all: everything but delivered-and-expired and retention-expired. */
const VISIBLE_WHERE = `expires_at > $cutoff AND (status <> 'delivered' OR expires_at > $now)`

/** Message storage on one connection. Hot statements are prepared once; lists per filter shape. */
export class SqliteMessageStore implements MessageStore {
  private readonly listStatements = new Map<string, Statement<MessageRecord, any>>()
  private readonly byId: Statement<MessageRecord, [string]>
  private readonly insertStmt: Statement<unknown, any[]>
  private readonly linkBlobStmt: Statement<unknown, [string, string, number]>
  private readonly deliverOne: Statement<unknown, [number, string, string, number]>
  private readonly deliverMany: Statement<unknown, [number, string, number]>
  private readonly threadStmt: Statement<MessageRecord, any>
  private readonly expiringStmt: Statement<ExpiringRow, [number, number, number, number]>
  private readonly expireStmt: Statement<unknown, [string]>
  private readonly unlinkBlobsStmt: Statement<unknown, [string]>
  private readonly removeRowsStmt: Statement<unknown, [string]>
  private readonly removeOldStmt: Statement<unknown, [number, number]>
  private readonly removeForStmt: Statement<unknown, [string]>

  constructor(private readonly db: Database) {
    const c = db
    this.byId = c.prepare(`SELECT ${COLUMNS} FROM messages WHERE message_id = ?`)
    this.insertStmt = c.prepare(`INSERT INTO messages (message_id, sender_key, recipient_key, content_type, body, attachments,
        thread_id, in_reply_to, metadata, status, created_at, expires_at, delivered_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
    this.linkBlobStmt = c.prepare(`INSERT OR IGNORE INTO message_blobs (message_id, blob_id, expires_at) VALUES (?, ?, ?)`)
    this.deliverOne = c.prepare(`UPDATE messages SET status = 'delivered', delivered_at = ?
      WHERE message_id = ? AND +recipient_key = ? AND +status = 'sent' AND +expires_at > ?`)
    this.deliverMany = c.prepare(`UPDATE messages SET status = 'delivered', delivered_at = ?
      WHERE message_id IN (SELECT value FROM json_each(?)) AND +status = 'sent' AND +expires_at > ?`)
    // the thread index holds only messages with a thread (a partial index): named, so that a plan
    // that cannot use it fails when the statement is prepared instead of scanning every message
    this.threadStmt = c.prepare(`SELECT ${COLUMNS} FROM messages INDEXED BY messages_thread_idx
      WHERE thread_id = $thread AND (sender_key = $who OR recipient_key = $who) AND ${VISIBLE_WHERE}
        AND (created_at, message_id) > ($afterCreated, $afterId)
      ORDER BY created_at, message_id LIMIT $limit`)
    // (expires_at, rowid) is the order of messages_expires_idx, so a batch resumes exactly where the last ended
    this.expiringStmt = c.prepare(`SELECT rowid AS rowid, message_id AS messageId, status, expires_at AS expiresAt FROM messages
      WHERE (expires_at, rowid) > (?, ?) AND expires_at <= ? ORDER BY expires_at, rowid LIMIT ?`)
    this.expireStmt = c.prepare(`UPDATE messages SET status = 'expired', body = NULL, attachments = NULL
      WHERE rowid IN (SELECT value FROM json_each(?))`)
    this.unlinkBlobsStmt = c.prepare(`DELETE FROM message_blobs WHERE message_id IN (SELECT value FROM json_each(?))`)
    this.removeRowsStmt = c.prepare(`DELETE FROM messages WHERE rowid IN (SELECT value FROM json_each(?))`)
    this.removeOldStmt = c.prepare(`DELETE FROM messages
      WHERE rowid IN (SELECT rowid FROM messages WHERE expires_at <= ? ORDER BY expires_at LIMIT ?)`)
    this.removeForStmt = c.prepare('DELETE FROM messages WHERE recipient_key = ?')
  }

  async find(messageId: string): Promise<MessageRecord | null> {
    return this.byId.get(messageId)
  }

  async insert(m: MessageRecord, blobIds: readonly string[]): Promise<boolean> {
    try {
      this.insertStmt.run(
        m.messageId, m.senderKey, m.recipientKey, m.contentType, m.body, m.attachments,
        m.threadId, m.inReplyTo, m.metadata, m.status, m.createdAt, m.expiresAt, m.deliveredAt,
      )
    } catch (err) {
      if (isUniqueViolation(err)) return false
      throw err
    }
    for (const blobId of blobIds) this.linkBlobStmt.run(m.messageId, blobId, m.expiresAt)
    return true
  }

  async listInbox(recipientKey: string, filter: InboxFilter, after: MessagePosition | null, limit: number, now: number, cutoff: number): Promise<MessageRecord[]> {
    const shape = `${filter.status}:${filter.senderKey ? 's' : ''}${filter.inReplyTo ? 'r' : ''}${filter.threadId ? 't' : ''}`
    let stmt = this.listStatements.get(shape)
    if (!stmt) {
      const extra = [
        filter.senderKey ? 'AND sender_key = $sender' : '',
        filter.inReplyTo ? 'AND in_reply_to = $reply' : '',
        filter.threadId ? 'AND thread_id = $thread' : '',
      ].join(' ')
      // the inbox index always: the expiry index would scan every recipient's expired messages
      stmt = this.db.prepare(`SELECT ${COLUMNS} FROM messages INDEXED BY messages_inbox_idx
        WHERE recipient_key = $recipient AND ${STATUS_WHERE[filter.status]} ${extra}
          AND (created_at, message_id) > ($afterCreated, $afterId)
        ORDER BY created_at, message_id LIMIT $limit`)
      this.listStatements.set(shape, stmt)
    }
    const pos = after ?? START
    const params: Record<string, string | number> = { recipient: recipientKey, now, afterCreated: pos.createdAt, afterId: pos.messageId, limit }
    if (filter.status === 'expired') params.cutoff = cutoff
    if (filter.senderKey) params.sender = filter.senderKey
    if (filter.inReplyTo) params.reply = filter.inReplyTo
    if (filter.threadId) params.thread = filter.threadId
    return stmt.all(params)
  }

  async listThread(threadId: string, participantKey: string, after: MessagePosition | null, limit: number, now: number, cutoff: number): Promise<MessageRecord[]> {
    const pos = after ?? START
    return this.threadStmt.all({ thread: threadId, who: participantKey, now, cutoff, afterCreated: pos.createdAt, afterId: pos.messageId, limit })
  }

  async markDeliveredFor(messageId: string, recipientKey: string, now: number): Promise<boolean> {
    return this.deliverOne.run(now, messageId, recipientKey, now).changes > 0
  }

  async markDelivered(ids: readonly string[], now: number): Promise<number> {
    if (ids.length === 0) return 0
    return this.deliverMany.run(now, JSON.stringify(ids), now).changes
  }

  async expireBatch(after: SweepCursor, now: number, limit: number): Promise<ExpireBatchResult> {
    const rows = this.expiringStmt.all(after.expiresAt, after.key === null ? Number.MAX_SAFE_INTEGER : Number(after.key), now, limit)
    const expire: number[] = []
    const expiredIds: string[] = []
    const remove: number[] = []
    for (const r of rows) {
      if (r.status === 'sent') {
        expire.push(r.rowid)
        expiredIds.push(r.messageId)
      } else if (r.status === 'delivered') remove.push(r.rowid)
    }
    if (expire.length) {
      this.expireStmt.run(JSON.stringify(expire))
      this.unlinkBlobsStmt.run(JSON.stringify(expiredIds))
    }
    if (remove.length) this.removeRowsStmt.run(JSON.stringify(remove)) // blob links go by cascade
    const lastRow = rows[rows.length - 1]
    const last = lastRow ? { expiresAt: lastRow.expiresAt, key: lastRow.rowid } : after
    return { scanned: rows.length, expired: expire.length, removed: remove.length, last }
  }

  async removeExpiredBatch(cutoff: number, limit: number): Promise<number> {
    return this.removeOldStmt.run(cutoff, limit).changes
  }

  async removeAddressedTo(publicKey: string): Promise<number> {
    return this.removeForStmt.run(publicKey).changes
  }
}
