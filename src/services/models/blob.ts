/** Wire shape of blobs (docs/protocol.md §6) and its one serializer; used for responses and the OpenAPI document. */
import { Type as T, type Static } from '@sinclair/typebox'
import { iso } from '../../lib/clock.ts'
import type { BlobRecord } from './records.ts'

export const BlobResult = T.Object({
  blob_id: T.String({ pattern: '^blob_[0-9a-f]{24}$', description: 'random, never derived from the content' }),
  hash: T.String({ pattern: '^[0-9a-f]{64}$', description: 'SHA-256 hex of the bytes' }),
  size: T.Integer({ minimum: 0, description: 'bytes' }),
  content_type: T.String(),
  created_at: T.String({ format: 'date-time' }),
  expires_at: T.String({ format: 'date-time', description: '24 h after upload while unattached; then the latest expiry of the messages attaching it' }),
})
export type BlobJson = Static<typeof BlobResult>

/** The blob result of docs/protocol.md §6, fields in its order. */
export function blobToJson(row: BlobRecord): BlobJson {
  return {
    blob_id: row.blobId,
    hash: row.hash,
    size: row.sizeBytes,
    content_type: row.contentType,
    created_at: iso(row.createdAt),
    expires_at: iso(row.expiresAt),
  }
}

/** A blob's content type is stored verbatim, within the limit of message content types. */
export const BLOB_CONTENT_TYPE_MAX = 255
export const DEFAULT_BLOB_CONTENT_TYPE = 'application/octet-stream'
