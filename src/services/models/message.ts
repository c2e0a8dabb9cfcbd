/** Wire shapes of messages (docs/protocol.md §4); used for validation and the OpenAPI document. */
import { Type as T, type Static } from '@sinclair/typebox'
import { PublicKey } from './agent.ts'
import { Text } from './text.ts'

const DateTime = T.String({ format: 'date-time' })

/** docs/protocol.md §4.1 / §12 limits. */
export const MESSAGE_LIMITS = {
  bodyBytes: 1024 * 1024,
  attachments: 10,
  contentType: 255,
  threadId: 128,
  /** A message id is at most 33 chars; other relays' ids may be longer, so leave room. */
  inReplyTo: 128,
  metadataBytes: 16 * 1024,
  filename: 255,
  dekBytes: 4 * 1024,
  expiresInMinS: 1,
  expiresInMaxS: 2_592_000,
  expiresInDefaultS: 604_800,
  pageMax: 100,
  pageDefault: 50,
} as const

export const MessageStatus = T.Union([T.Literal('sent'), T.Literal('delivered'), T.Literal('expired')])
export type MessageStatus = Static<typeof MessageStatus>

/** Attachment as a sender gives it: `content_type`, `size` and `hash` are accepted but ignored. */
export const AttachmentInput = T.Object(
  {
    blob_id: Text({ minChars: 1, maxChars: 64 }),
    filename: T.Optional(Text({ maxChars: MESSAGE_LIMITS.filename })),
    content_type: T.Optional(Text({ maxChars: MESSAGE_LIMITS.contentType })),
    size: T.Optional(T.Integer({ minimum: 0 })),
    hash: T.Optional(Text({ maxChars: 128 })),
    encrypted: T.Optional(T.Boolean()),
    dek_enc: T.Optional(Text({ maxChars: MESSAGE_LIMITS.dekBytes, description: 'at most 4 KiB' })),
    dek_ct: T.Optional(Text({ maxChars: MESSAGE_LIMITS.dekBytes, description: 'at most 4 KiB' })),
  },
  { additionalProperties: false },
)
export type AttachmentInput = Static<typeof AttachmentInput>

/** Attachment as stored and returned, with the relay's own content_type, size and hash (docs/protocol.md §4.1). */
export const Attachment = T.Object({
  blob_id: T.String(),
  filename: T.Optional(T.String()),
  content_type: T.String(),
  size: T.Integer(),
  hash: T.String({ description: 'SHA-256 hex of the blob bytes' }),
  encrypted: T.Boolean(),
  dek_enc: T.Optional(T.String()),
  dek_ct: T.Optional(T.String()),
})
export type AttachmentJson = Static<typeof Attachment>

export const SendMessageInput = T.Object(
  {
    recipient_key: PublicKey,
    content_type: T.Optional(Text({ maxChars: MESSAGE_LIMITS.contentType, description: 'default application/json; stored verbatim; null = absent' })),
    body: T.Optional(T.Unknown({ description: 'any JSON, ≤ 1 MiB as sent; returned exactly as sent (numbers, escapes and spacing kept)' })),
    attachments: T.Optional(
      T.Array(T.Union([AttachmentInput, Text({ minChars: 1, maxChars: 64, description: 'a bare blob id, the same as {"blob_id": …}' })]), {
        maxItems: MESSAGE_LIMITS.attachments,
        description: 'objects or bare blob ids; content_type, size and hash are filled in from the blob record; null = absent',
      }),
    ),
    thread_id: T.Optional(Text({ minChars: 1, maxChars: MESSAGE_LIMITS.threadId, description: 'null = absent' })),
    in_reply_to: T.Optional(Text({ minChars: 1, maxChars: MESSAGE_LIMITS.inReplyTo, description: 'null = absent' })),
    expires_in: T.Optional(
      T.Integer({ minimum: MESSAGE_LIMITS.expiresInMinS, maximum: MESSAGE_LIMITS.expiresInMaxS, description: 'seconds; default 604800 (7 days); null = absent' }),
    ),
    metadata: T.Optional(T.Record(T.String(), T.Unknown(), { description: 'object, ≤ 16 KiB as sent; returned exactly as sent; null = absent' })),
  },
  { additionalProperties: false },
)
export type SendMessageInput = Static<typeof SendMessageInput>

/** The send body as checked, once bare blob ids became `{blob_id}` objects (field errors then name `attachments[i].blob_id`). */
export const SendMessageShape = T.Object(
  { ...SendMessageInput.properties, attachments: T.Optional(T.Array(AttachmentInput, { maxItems: MESSAGE_LIMITS.attachments })) },
  { additionalProperties: false },
)

export const SendResult = T.Object({
  message_id: T.String(),
  status: T.Literal('sent'),
  created_at: DateTime,
  expires_at: DateTime,
})
export type SendResultJson = Static<typeof SendResult>

export const Message = T.Object({
  message_id: T.String({ pattern: '^msg_[0-9]+_[0-9a-f]{12}$' }),
  sender_key: PublicKey,
  recipient_key: PublicKey,
  content_type: T.String(),
  body: T.Optional(T.Unknown()),
  attachments: T.Array(Attachment, { description: '[] when none' }),
  thread_id: T.Union([T.String(), T.Null()]),
  in_reply_to: T.Union([T.String(), T.Null()]),
  metadata: T.Union([T.Record(T.String(), T.Unknown()), T.Null()]),
  status: MessageStatus,
  created_at: DateTime,
  expires_at: DateTime,
  delivered_at: T.Optional(DateTime),
})
export type MessageJson = Static<typeof Message>

export const MessagePage = T.Object({
  messages: T.Array(Message),
  has_more: T.Boolean(),
  next_cursor: T.Union([T.String(), T.Null()]),
})
export type MessagePageJson = Static<typeof MessagePage>

export const MessageStatusResult = T.Object({
  message_id: T.String(),
  status: MessageStatus,
  created_at: DateTime,
  expires_at: DateTime,
  delivered_at: T.Optional(DateTime),
})
export type MessageStatusJson = Static<typeof MessageStatusResult>

/** Query of GET /v1/messages as the client builds it. */
export interface PollQuery {
  cursor?: string
  limit?: number
  status?: MessageStatus
  sender_key?: string
  in_reply_to?: string
  thread_id?: string
}

export interface PageQuery {
  cursor?: string
  limit?: number
}
