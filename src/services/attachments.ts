/**
 * docs/protocol.md §4.3 check 4: every attachment names a blob that exists and belongs to the sender. The default
 * here, for a messages service without blob storage, refuses every attachment with 422 naming the blob
 * ids; the blobs feature replaces it (MessagesService.setAttachmentResolver) with one that checks blob
 * records and fills content_type, size and hash from them, plus a linker that ties the blobs' lifetime
 * to the message inside the send transaction.
 */
import { RelayError } from '../errors.ts'
import type { AttachmentInput, AttachmentJson } from './models/message.ts'

/** An attachment ready to store: the relay's content_type/size/hash plus the sender's other fields. */
export type ResolvedAttachment = AttachmentJson

/**
 * Resolves the attachments of a send by `senderKey` at `now`, or throws 422 `unprocessable_entity`
 * with `details.blob_ids` naming the unusable ones. Runs before the rate check, outside any transaction.
 */
export type AttachmentResolver = (senderKey: string, attachments: readonly AttachmentInput[], now: number) => Promise<ResolvedAttachment[]>

export const resolveAttachments: AttachmentResolver = async (_senderKey, attachments) => {
  if (attachments.length === 0) return []
  const blobIds = attachments.map((a) => a.blob_id)
  throw new RelayError('unprocessable_entity', `Unknown blob${blobIds.length > 1 ? 's' : ''}: ${blobIds.join(', ')}`, { blob_ids: blobIds })
}
