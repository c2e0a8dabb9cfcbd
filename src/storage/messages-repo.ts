import type { Database, Statement } from 'bun:sqlite'
import type { Db } from './db.ts'
import type { messages } from './schema.ts'

export type MessageRow = typeof messages.$inferSelect
export type MessageStatusValue = MessageRow['status']

/** A place in the (created_at, message_id) order of message lists. */
export interface Position {
  createdAt: number
  messageId: string
}

export interface InboxFilter {
  status: MessageStatusValue
  senderKey?: string
  inReplyTo?: string
  threadId?: string
}

/** A place in the (expires_at, rowid) order the sweep walks. */
export interface SweepPosition {
  expiresAt: number
  rowid: number
}

interface ExpiringRow {
  rowid: number
  messageId: string
  status: MessageStatusValue
  expiresAt: number
}

export interface RecipientInfo {
  status: 'active' | 'suspended'
  inboxPolicy: 'open' | 'closed' | 'allowlist' | 'blocklist'
}

const COLUMNS = `message_id AS messageId, sender_key AS senderKey, recipient_key AS recipientKey,
  content_type AS contentType, body, attachments, thread_id AS threadId, in_reply_to AS inReplyTo,
  metadata, status, created_at AS createdAt, expires_at AS expiresAt, delivered_at AS deliveredAt`

/** Before every real position: lets one statement serve first pages and later pages alike. */
const START: Position = { createdAt: -1, messageId: '' }

/**
 * Which rows each status filter sees at `now` (params :now, :cutoff = now − expired retention).
 * Expiry is decided by time, not by the sweep: a `sent` row past `expires_at` already counts as expired,
 * a `delivered` one as removed, and an expired envelope past retention as removed (SPEC §4.6).
 */
const STATUS_WHERE: Record<MessageStatusValue, string> = {
  sent: `status = 'sent' AND expires_at > $now`,
  delivered: `status = 'delivered' AND expires_at > $now`,
  expired: `status IN ('sent', 'expired') AND +expires_at <= $now AND +expires_at > $cutoff`,
}
/** Rows that exist for readers at all: everything but delivered-and-expired and retention-expired. */
const VISIBLE_WHERE = `expires_at > $cutoff AND (status <> 'delivered' OR expires_at > $now)`

/**
 * Message storage. Hot statements are prepared once; list statements are prepared per filter shape.
 * Methods take `now` from the caller; rules live in the messages service.
 */
export class MessagesRepo {
  readonly client: Database
  private readonly listStatements = new Map<string, Statement<MessageRow, any>>()
  private readonly byId: Statement<MessageRow, [string]>
  private readonly recipientStmt: Statement<RecipientInfo, [string]>
  private readonly insertStmt: Statement<unknown, any[]>
  private readonly linkBlobStmt: Statement<unknown, [string, string, number]>
  private readonly deliverOne: Statement<unknown, [number, string, string, number]>
  private readonly deliverMany: Statement<unknown, [number, string, number]>
  private readonly threadStmt: Statement<MessageRow, any>
  private readonly expiringStmt: Statement<ExpiringRow, [number, number, number, number]>
  private readonly expireStmt: Statement<unknown, [string]>
  private readonly unlinkBlobsStmt: Statement<unknown, [string]>
  private readonly removeRowsStmt: Statement<unknown, [string]>
  private readonly removeOldStmt: Statement<unknown, [number, number]>
  private readonly stateGet: Statement<{ value: string }, [string]>
  private readonly stateSet: Statement<unknown, [string, string]>

  constructor(db: Db) {
    const c = (this.client = db.$client)
    this.byId = c.prepare(`SELECT ${COLUMNS} FROM messages WHERE message_id = ?`)
    this.recipientStmt = c.prepare(`SELECT status, inbox_policy AS inboxPolicy FROM agents WHERE public_key = ?`)
    this.insertStmt = c.prepare(`INSERT INTO messages (message_id, sender_key, recipient_key, content_type, body, attachments,
        thread_id, in_reply_to, metadata, status, created_at, expires_at, delivered_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
    this.linkBlobStmt = c.prepare(`INSERT OR IGNORE INTO message_blobs (message_id, blob_id, expires_at) VALUES (?, ?, ?)`)
    this.deliverOne = c.prepare(`UPDATE messages SET status = 'delivered', delivered_at = ?
      WHERE message_id = ? AND +recipient_key = ? AND +status = 'sent' AND +expires_at > ?`)
    this.deliverMany = c.prepare(`UPDATE messages SET status = 'delivered', delivered_at = ?
      WHERE message_id IN (SELECT value FROM json_each(?)) AND +status = 'sent' AND +expires_at > ?`)
    this.threadStmt = c.prepare(`SELECT ${COLUMNS} FROM messages
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
    this.stateGet = c.prepare(`SELECT value FROM relay_state WHERE key = ?`)
    this.stateSet = c.prepare(`INSERT INTO relay_state (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`)
  }

  find(messageId: string): MessageRow | null {
    return this.byId.get(messageId)
  }

  /** Status and inbox policy of a would-be recipient; null for an unknown key. */
  recipient(publicKey: string): RecipientInfo | null {
    return this.recipientStmt.get(publicKey)
  }

  /** Inserts a message and its blob links; call inside a transaction. */
  insert(row: MessageRow, blobIds: readonly string[] = []): void {
    this.insertStmt.run(
      row.messageId,
      row.senderKey,
      row.recipientKey,
      row.contentType,
      row.body,
      row.attachments,
      row.threadId,
      row.inReplyTo,
      row.metadata,
      row.status,
      row.createdAt,
      row.expiresAt,
      row.deliveredAt,
    )
    for (const blobId of blobIds) this.linkBlobStmt.run(row.messageId, blobId, row.expiresAt)
  }

  /**
   * Messages addressed to `recipientKey` seen by `filter.status` at `now`, after `after`, oldest first.
   * `cutoff` is the oldest expires_at an expired envelope may have and still exist.
   */
  listInbox(recipientKey: string, filter: InboxFilter, after: Position | null, limit: number, now: number, cutoff: number): MessageRow[] {
    const shape = `${filter.status}:${filter.senderKey ? 's' : ''}${filter.inReplyTo ? 'r' : ''}${filter.threadId ? 't' : ''}`
    let stmt = this.listStatements.get(shape)
    if (!stmt) {
      const extra = [
        filter.senderKey ? 'AND sender_key = $sender' : '',
        filter.inReplyTo ? 'AND in_reply_to = $reply' : '',
        filter.threadId ? 'AND thread_id = $thread' : '',
      ].join(' ')
      // the inbox index always: the expiry index would scan every recipient's expired messages
      stmt = this.client.prepare(`SELECT ${COLUMNS} FROM messages INDEXED BY messages_inbox_idx
        WHERE recipient_key = $recipient AND ${STATUS_WHERE[filter.status]} ${extra}
          AND (created_at, message_id) > ($afterCreated, $afterId)
        ORDER BY created_at, message_id LIMIT $limit`)
      this.listStatements.set(shape, stmt)
    }
    const pos = after ?? START
    const params: Record<string, string | number> = {
      recipient: recipientKey,
      now,
      afterCreated: pos.createdAt,
      afterId: pos.messageId,
      limit,
    }
    if (filter.status === 'expired') params.cutoff = cutoff
    if (filter.senderKey) params.sender = filter.senderKey
    if (filter.inReplyTo) params.reply = filter.inReplyTo
    if (filter.threadId) params.thread = filter.threadId
    return stmt.all(params)
  }

  /** Messages of a thread that `participantKey` sent or received and that still exist, oldest first. */
  listThread(threadId: string, participantKey: string, after: Position | null, limit: number, now: number, cutoff: number): MessageRow[] {
    const pos = after ?? START
    return this.threadStmt.all({ thread: threadId, who: participantKey, now, cutoff, afterCreated: pos.createdAt, afterId: pos.messageId, limit })
  }

  /** Marks one message delivered if it is `recipientKey`'s, `sent` and unexpired; true when it changed. */
  markDeliveredFor(messageId: string, recipientKey: string, now: number): boolean {
    return this.deliverOne.run(now, messageId, recipientKey, now).changes > 0
  }

  /** Marks the `sent`, unexpired ones among `ids` delivered; returns how many changed. */
  markDelivered(ids: readonly string[], now: number): number {
    if (ids.length === 0) return 0
    return this.deliverMany.run(now, JSON.stringify(ids), now).changes
  }

  /**
   * One sweep batch over messages whose expires_at lies after `after` and at or before `now`, in
   * (expires_at, rowid) order: `sent` ones become `expired` with body and attachment links dropped,
   * `delivered` ones are removed, others are left. Returns the counts and where the batch ended.
   */
  expireBatch(after: SweepPosition, now: number, limit: number): { scanned: number; expired: number; removed: number; last: SweepPosition } {
    const rows = this.expiringStmt.all(after.expiresAt, after.rowid, now, limit)
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
    const last = lastRow ? { expiresAt: lastRow.expiresAt, rowid: lastRow.rowid } : after
    return { scanned: rows.length, expired: expire.length, removed: remove.length, last }
  }

  /** Removes up to `limit` messages whose expires_at is at or before `cutoff`, whatever their status. */
  removeExpiredBatch(cutoff: number, limit: number): number {
    return this.removeOldStmt.run(cutoff, limit).changes
  }

  /** A persisted number of the relay (e.g. the sweep watermark); null when never set. */
  stateNumber(key: string): number | null {
    const row = this.stateGet.get(key)
    return row ? Number(row.value) : null
  }

  setStateNumber(key: string, value: number): void {
    this.stateSet.run(key, String(value))
  }

  /** Runs `fn` in one write transaction (synchronous; never await inside). */
  transaction<T>(fn: () => T): T {
    return this.client.transaction(fn).immediate()
  }
}
