/** Wire shapes of webhooks (docs/protocol.md §9); used for validation and the OpenAPI document. */
import { Type as T, type Static } from '@sinclair/typebox'
import { Text } from './text.ts'

const DateTime = T.String({ format: 'date-time' })

/** docs/protocol.md §9 limits. */
export const WEBHOOK_LIMITS = { urlChars: 2048, secretBytes: 32 } as const

export const WebhookPutInput = T.Object(
  {
    url: Text({ minChars: 1, maxChars: WEBHOOK_LIMITS.urlChars, description: 'http or https URL, ≤ 2,048 characters, no spaces or control characters' }),
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

/** The body the relay POSTs to a webhook (docs/protocol.md §9): the message without status, attachments as metadata. */

/** The webhook payload, as receivers see it: the client's definition (src/client/types.ts). */
export type { WebhookDeliveryJson } from '../../client/types.ts'
