import type { InboxFilter, MessagePosition, MessageRecord, MessageStatus } from '../../services/models/records.ts'
import type { ExpireBatchResult, MessageStore, SweepCursor } from '../../services/ports.ts'
import { exec, one, rows, type Db } from './db.ts'
import { isUniqueViolation } from './errors.ts'

const COLUMNS = `message_id AS "messageId", sender_key AS "senderKey", recipient_key AS "recipientKey",
  content_type AS "contentType", body, attachments, thread_id AS "threadId", in_reply_to AS "inReplyTo",
  metadata, status, created_at::float8 AS "createdAt", expires_at::float8 AS "expiresAt", delivered_at::float8 AS "deliveredAt"`

/** Before every real position: lets one statement serve first pages and later pages alike. */
const START: MessagePosition = { createdAt: -1, messageId: '' }

/**
 * Which rows each status filter sees at `now` is decided by time, not by the sweep (as in SQLite): a
 * `sent` row past expires_at already counts as expired, a `delivered` one as removed, and an expired
 * envelope past retention (`cutoff`) as removed. Rows that exist for readers at all ($2 = now, $3 = cutoff):
 */
const VISIBLE_WHERE = `expires_at > $3 AND (status <> 'delivered' OR expires_at > $2)`

/**
 * Message storage on the pool or on one transaction. In a transaction, reading a page of `sent` messages
 * (a poll, which marks the page delivered in the same unit) first takes a transaction-scoped advisory
 * lock on the inbox, and locks the rows it returns: polls of one inbox — on this instance or another —
 * run one after the other, each seeing what the previous one delivered, as under SQLite's single writer.
 */
export class PgMessageStore implements MessageStore {
  constructor(
    private readonly db: Db,
    private readonly inTransaction = false,
  ) {}

  async find(messageId: string): Promise<MessageRecord | null> {
    return one<MessageRecord>(this.db, `SELECT ${COLUMNS} FROM messages WHERE message_id = $1`, [messageId])
  }

  /** The messages of these ids that exist, in no particular order (one statement). */
  async findMany(messageIds: readonly string[]): Promise<MessageRecord[]> {
    if (messageIds.length === 0) return []
    return rows<MessageRecord>(this.db, `SELECT ${COLUMNS} FROM messages WHERE message_id = ANY($1::text[])`, [[...messageIds]])
  }

  async insert(m: MessageRecord, blobIds: readonly string[]): Promise<boolean> {
    const inserted = await exec(
      this.db,
      `INSERT INTO messages (message_id, sender_key, recipient_key, content_type, body, attachments,
         thread_id, in_reply_to, metadata, status, created_at, expires_at, delivered_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT (message_id) DO NOTHING`,
      [m.messageId, m.senderKey, m.recipientKey, m.contentType, m.body, m.attachments, m.threadId, m.inReplyTo, m.metadata, m.status, m.createdAt, m.expiresAt, m.deliveredAt],
    ).catch((err) => {
      if (isUniqueViolation(err)) return 0
      throw err
    })
    if (inserted === 0) return false
    if (blobIds.length) {
      await exec(
        this.db,
        `INSERT INTO message_blobs (message_id, blob_id, expires_at) SELECT $1, unnest($2::text[]), $3 ON CONFLICT DO NOTHING`,
        [m.messageId, [...new Set(blobIds)], m.expiresAt],
      )
    }
    return true
  }

  async listInbox(recipientKey: string, filter: InboxFilter, after: MessagePosition | null, limit: number, now: number, cutoff: number): Promise<MessageRecord[]> {
    const pos = after ?? START
    const params: unknown[] = [recipientKey, now]
    const p = (value: unknown) => `$${params.push(value)}`
    const where = [`recipient_key = $1`]
    if (filter.status === 'expired') where.push(`status IN ('sent', 'expired') AND expires_at <= $2 AND expires_at > ${p(cutoff)}`)
    else where.push(`status = ${p(filter.status)} AND expires_at > $2`)
    if (filter.senderKey) where.push(`sender_key = ${p(filter.senderKey)}`)
    if (filter.inReplyTo) where.push(`in_reply_to = ${p(filter.inReplyTo)}`)
    if (filter.threadId) where.push(`thread_id = ${p(filter.threadId)}`)
    where.push(`(created_at, message_id) > (${p(pos.createdAt)}::bigint, ${p(pos.messageId)}::text)`)
    const poll = this.inTransaction && filter.status === 'sent'
    if (poll) await exec(this.db, 'SELECT pg_advisory_xact_lock(hashtext($1))', [`relay.inbox:${recipientKey}`])
    const lock = poll ? ' FOR UPDATE' : ''
    return rows<MessageRecord>(
      this.db,
      `SELECT ${COLUMNS} FROM messages WHERE ${where.join(' AND ')} ORDER BY created_at, message_id LIMIT ${p(limit)}${lock}`,
      params,
    )
  }

  async listThread(threadId: string, participantKey: string, after: MessagePosition | null, limit: number, now: number, cutoff: number): Promise<MessageRecord[]> {
    const pos = after ?? START
    return rows<MessageRecord>(
      this.db,
      `SELECT ${COLUMNS} FROM messages
       WHERE thread_id = $1 AND (sender_key = $7 OR recipient_key = $7) AND ${VISIBLE_WHERE}
         AND (created_at, message_id) > ($4::bigint, $5::text)
       ORDER BY created_at, message_id LIMIT $6`,
      [threadId, now, cutoff, pos.createdAt, pos.messageId, limit, participantKey],
    )
  }

  async markDeliveredFor(messageId: string, recipientKey: string, now: number): Promise<boolean> {
    const changed = await exec(
      this.db,
      `UPDATE messages SET status = 'delivered', delivered_at = $1
       WHERE message_id = $2 AND recipient_key = $3 AND status = 'sent' AND expires_at > $1`,
      [now, messageId, recipientKey],
    )
    return changed > 0
  }

  async markDelivered(ids: readonly string[], now: number): Promise<number> {
    if (ids.length === 0) return 0
    return exec(
      this.db,
      `UPDATE messages SET status = 'delivered', delivered_at = $1
       WHERE message_id = ANY($2::text[]) AND status = 'sent' AND expires_at > $1`,
      [now, [...ids]],
    )
  }

  /** Walks (expires_at, message_id), the order of messages_expires_idx; the cursor's key is a message id. */
  async expireBatch(after: SweepCursor, now: number, limit: number): Promise<ExpireBatchResult> {
    const key = typeof after.key === 'string' ? after.key : null
    const batch =
      key === null
        ? await rows<{ messageId: string; status: MessageStatus; expiresAt: number }>(
            this.db,
            `SELECT message_id AS "messageId", status, expires_at::float8 AS "expiresAt" FROM messages
             WHERE expires_at > $1 AND expires_at <= $2 ORDER BY expires_at, message_id LIMIT $3 FOR UPDATE`,
            [after.expiresAt, now, limit],
          )
        : await rows<{ messageId: string; status: MessageStatus; expiresAt: number }>(
            this.db,
            `SELECT message_id AS "messageId", status, expires_at::float8 AS "expiresAt" FROM messages
             WHERE (expires_at, message_id) > ($1::bigint, $4::text) AND expires_at <= $2 ORDER BY expires_at, message_id LIMIT $3 FOR UPDATE`,
            [after.expiresAt, now, limit, key],
          )
    const expire: string[] = []
    const remove: string[] = []
    for (const r of batch) {
      if (r.status === 'sent') expire.push(r.messageId)
      else if (r.status === 'delivered') remove.push(r.messageId)
    }
    if (expire.length) {
      await exec(this.db, `UPDATE messages SET status = 'expired', body = NULL, attachments = NULL WHERE message_id = ANY($1::text[])`, [expire])
      await exec(this.db, `DELETE FROM message_blobs WHERE message_id = ANY($1::text[])`, [expire])
    }
    if (remove.length) await exec(this.db, `DELETE FROM messages WHERE message_id = ANY($1::text[])`, [remove])
    const lastRow = batch[batch.length - 1]
    const last = lastRow ? { expiresAt: lastRow.expiresAt, key: lastRow.messageId } : after
    return { scanned: batch.length, expired: expire.length, removed: remove.length, last }
  }

  async removeExpiredBatch(cutoff: number, limit: number): Promise<number> {
    return exec(
      this.db,
      `DELETE FROM messages WHERE message_id IN (
         SELECT message_id FROM messages WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
      [cutoff, limit],
    )
  }

  async removeAddressedTo(publicKey: string): Promise<number> {
    return exec(this.db, 'DELETE FROM messages WHERE recipient_key = $1', [publicKey])
  }
}
