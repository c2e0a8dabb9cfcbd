/**
 * Opaque page cursors for message lists (docs/protocol.md §4.4, §4.5): base64url of `<created_at>.<message_id>`,
 * the position of the last message returned. The next page starts strictly after it in the
 * (created_at, message_id) order, so a walk never repeats and never skips a message that stays put.
 */
import { badRequest } from '../errors.ts'
import { decodePosition, encodePosition } from '../lib/cursor.ts'
import { MESSAGE_ID_PATTERN } from '../lib/ids.ts'

export interface MessagePosition {
  createdAt: number
  messageId: string
}

export function encodeCursor(pos: MessagePosition): string {
  return encodePosition(pos.createdAt, pos.messageId)
}

/** Decodes a cursor or throws 400 naming the `cursor` parameter. */
export function decodeCursor(cursor: string): MessagePosition {
  const pos = decodePosition(cursor, MESSAGE_ID_PATTERN)
  if (!pos) throw badRequest('Invalid cursor', { cursor: 'not a cursor returned by this relay' })
  return { createdAt: pos.n, messageId: pos.id }
}
