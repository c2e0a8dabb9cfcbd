/** Wire shapes of webhooks (SPEC §9); used for validation and the OpenAPI document. */
import { Type as T, type Static } from '@sinclair/typebox'

const DateTime = T.String({ format: 'date-time' })

/** SPEC §9 limits. */
export const WEBHOOK_LIMITS = { urlChars: 2048, secretBytes: 32 } as const

export const WebhookPutInput = T.Object(
  {
    url: T.String({ minLength: 1, maxLength: WEBHOOK_LIMITS.urlChars, description: 'http or https URL, ≤ 2,048 characters' }),
    secret: T.String({ description: 'unpadded base64url of exactly 32 random bytes; keyed HMAC-SHA256 of each delivery, never returned' }),
  },
  { additionalProperties: false },
)

export const WebhookConfig = T.Object({
  url: T.String(),
  enabled: T.Boolean(),
  consecutive_failures: T.Integer({ minimum: 0 }),
  created_at: DateTime,
  updated_at: DateTime,
})
export type WebhookConfigJson = Static<typeof WebhookConfig>

/** The body the relay POSTs to a webhook (SPEC §9): the message without status, attachments as metadata. */
export interface WebhookDeliveryJson {
  delivery_id: string
  message: {
    message_id: string
    sender_key: string
    recipient_key: string
    content_type: string
    body?: unknown
    attachments: unknown[]
    thread_id?: string
    in_reply_to?: string
    metadata?: Record<string, unknown>
    created_at: string
    expires_at: string
  }
}
