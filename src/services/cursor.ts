/**
 * Opaque page cursors for message lists (SPEC §4.4, §4.5): base64url of `<created_at>.<message_id>`,
 * the position of the last message returned. The next page starts strictly after it in the
 * (created_at, message_id) order, so a walk never repeats and never skips a message that stays put.
 */
import { badRequest } from '../errors.ts'
import { decodeBase64Url } from '../lib/base64url.ts'
import { MESSAGE_ID_PATTERN } from '../lib/ids.ts'

export interface MessagePosition {
  createdAt: number
  messageId: string
}

const CURSOR_TEXT = /^(\d{1,15})\.(msg_\d{1,12}_[0-9a-f]{12})$/

export function encodeCursor(pos: MessagePosition): string {
  return Buffer.from(`${pos.createdAt}.${pos.messageId}`, 'utf8').toString('base64url')
}

/** Decodes a cursor or throws 400 naming the `cursor` parameter. */
export function decodeCursor(cursor: string): MessagePosition {
  const bytes = cursor.length <= 128 ? decodeBase64Url(cursor) : null
  const m = bytes ? CURSOR_TEXT.exec(Buffer.from(bytes).toString('latin1')) : null
  if (!m || !MESSAGE_ID_PATTERN.test(m[2])) throw badRequest('Invalid cursor', { cursor: 'not a cursor returned by this relay' })
  return { createdAt: Number(m[1]), messageId: m[2] }
}
