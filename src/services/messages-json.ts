/**
 * The one serializer for the Message resource and its status view. `body` and
 * `metadata` are stored as the JSON text the sender sent and come back as that text: serialize a
 * message with `stringifyJson` (HTTP answers, WebSocket pushes and webhook payloads all do), which
 * splices it in unchanged.
 */
import { iso } from '../lib/clock.ts'
import { RawJson } from '../lib/json-text.ts'
import type { MessageRecord } from './models/records.ts'
import type { MessageJson, MessageStatus, MessageStatusJson } from './models/message.ts'

/** The status a reader sees at `now`: `expired` the instant expires_at passes, whatever the sweep did. */
export function effectiveStatus(row: Pick<MessageRecord, 'status' | 'expiresAt'>, now: number): MessageStatus {
  return row.status === 'sent' && row.expiresAt <= now ? 'expired' : row.status
}

/**
 * Message as JSON at `now`, in the shape MRP documents: `attachments` always present (`[]` when none),
 * `thread_id`, `in_reply_to` and `metadata` `null` when unset, `body` omitted when there is none, and
 * `delivered_at` present once delivered. An expired message has no body and no attachments
 * (docs/protocol.md §4.6), even before the sweep dropped them from storage.
 */
export function messageToJson(row: MessageRecord, now: number): MessageJson {
  const status = effectiveStatus(row, now)
  // built in docs/protocol.md §4.1 field order, so every channel prints the same JSON
  const out: Record<string, unknown> = {
    message_id: row.messageId,
    sender_key: row.senderKey,
    recipient_key: row.recipientKey,
    content_type: row.contentType,
  }
  const live = status !== 'expired'
  if (live && row.body !== null) out.body = new RawJson(row.body)
  out.attachments = live && row.attachments !== null ? JSON.parse(row.attachments) : []
  out.thread_id = row.threadId
  out.in_reply_to = row.inReplyTo
  out.metadata = row.metadata === null ? null : new RawJson(row.metadata)
  out.status = status
  out.created_at = iso(row.createdAt)
  out.expires_at = iso(row.expiresAt)
  if (row.deliveredAt !== null) out.delivered_at = iso(row.deliveredAt)
  return out as MessageJson
}

export function messageStatusToJson(row: MessageRecord, now: number): MessageStatusJson {
  const out: MessageStatusJson = {
    message_id: row.messageId,
    status: effectiveStatus(row, now),
    created_at: iso(row.createdAt),
    expires_at: iso(row.expiresAt),
  }
  if (row.deliveredAt !== null) out.delivered_at = iso(row.deliveredAt)
  return out
}
