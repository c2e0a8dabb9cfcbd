/**
 * For webhook receivers: checks a delivery the way the protocol asks — HMAC-SHA256 of the exact
 * raw body with the 32 secret bytes, compared in constant time; the timestamp within ±5 minutes — and
 * returns the parsed delivery. Web Crypto only, so it runs in Bun, Node 20+, Deno and workers alike;
 * given your keys it also decrypts an end-to-end encrypted message.
 */
import { bindEncryption, DecryptError, isEncryptedMessage, type AgentKeys, type CryptoPrimitives, type Encryption } from '../crypto/index.ts'
import type { MessageEncryptionJson, WebhookDeliveryJson } from './types.ts'

export type { WebhookDeliveryJson }

export class WebhookVerificationError extends Error {
  constructor(
    readonly reason: 'missing_header' | 'bad_secret' | 'bad_signature' | 'bad_timestamp' | 'stale' | 'bad_body',
    message: string,
  ) {
    super(message)
    this.name = 'WebhookVerificationError'
  }
}

export type HeaderSource = Headers | Record<string, string | string[] | undefined>

export interface VerifyWebhookInput {
  /** The request body exactly as received (bytes or the UTF-8 text). */
  rawBody: string | Uint8Array
  headers: HeaderSource
  /** The secret you registered: unpadded base64url of 32 bytes. */
  secret: string
  /** How far the timestamp may be from `now`; default 5 minutes. */
  toleranceMs?: number
  /** Current time in ms; default Date.now(). */
  now?: number
  /**
   * Your keys: an end-to-end encrypted message is then decrypted, as every other receive path of the
   * client does (plaintext body and `encryption` facts, or `encryption.error` with the reason).
   */
  keys?: AgentKeys
  /** The primitives to decrypt with (default node:crypto's; pass `purePrimitives` where there is none). */
  primitives?: CryptoPrimitives
}

function header(headers: HeaderSource, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined
  const record = headers as Record<string, string | string[] | undefined>
  const key = Object.keys(record).find((k) => k.toLowerCase() === name)
  const value = key === undefined ? undefined : record[key]
  return Array.isArray(value) ? value[0] : value
}

function base64UrlBytes(text: string): Uint8Array | null {
  if (!/^[A-Za-z0-9_-]*$/.test(text) || text.length % 4 === 1) return null
  const b64 = text.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (text.length % 4)) % 4)
  const bin = atob(b64)
  return Uint8Array.from(bin, (c) => c.charCodeAt(0))
}

function hexBytes(text: string): Uint8Array | null {
  if (!/^[0-9a-fA-F]*$/.test(text) || text.length % 2 !== 0) return null
  const out = new Uint8Array(text.length / 2)
  for (let i = 0; i < out.length; i++) out[i] = parseInt(text.slice(2 * i, 2 * i + 2), 16)
  return out
}

/** Compares without stopping at the first difference. */
function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  let diff = a.length ^ b.length
  for (let i = 0; i < Math.max(a.length, b.length); i++) diff |= (a[i] ?? 0) ^ (b[i] ?? 0)
  return diff === 0
}

/**
 * Verifies a webhook request and returns its delivery (`{delivery_id, message}`); throws a
 * WebhookVerificationError saying what is wrong. Deduplicate on `message.message_id` afterwards:
 * polling, the WebSocket and the webhook may each deliver one message.
 */
export async function verifyWebhook(input: VerifyWebhookInput): Promise<WebhookDeliveryJson> {
  const signature = header(input.headers, 'x-m2m-webhook-signature')
  const timestamp = header(input.headers, 'x-m2m-webhook-timestamp')
  if (!signature || !timestamp) throw new WebhookVerificationError('missing_header', 'X-M2M-Webhook-Signature and X-M2M-Webhook-Timestamp are required')
  const key = base64UrlBytes(input.secret)
  if (!key || key.length !== 32) throw new WebhookVerificationError('bad_secret', 'the secret must be unpadded base64url of 32 bytes')
  const raw = typeof input.rawBody === 'string' ? new TextEncoder().encode(input.rawBody) : input.rawBody
  const hmacKey = await crypto.subtle.importKey('raw', key as Uint8Array<ArrayBuffer>, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign'])
  const expected = new Uint8Array(await crypto.subtle.sign('HMAC', hmacKey, raw as Uint8Array<ArrayBuffer>))
  const given = hexBytes(signature.trim())
  if (!given || !constantTimeEqual(given, expected)) throw new WebhookVerificationError('bad_signature', 'the signature does not match the body')
  const sentAt = Date.parse(timestamp)
  if (!Number.isFinite(sentAt)) throw new WebhookVerificationError('bad_timestamp', 'X-M2M-Webhook-Timestamp is not a date')
  if (Math.abs((input.now ?? Date.now()) - sentAt) > (input.toleranceMs ?? 5 * 60_000)) {
    throw new WebhookVerificationError('stale', 'the timestamp is outside the allowed window')
  }
  let delivery: WebhookDeliveryJson
  try {
    delivery = JSON.parse(new TextDecoder().decode(raw)) as WebhookDeliveryJson
  } catch {
    throw new WebhookVerificationError('bad_body', 'the body is not JSON')
  }
  if (!input.keys || !delivery.message || !isEncryptedMessage(delivery.message)) return delivery
  const primitives = input.primitives ?? (await import('../crypto/native.ts')).nativePrimitives
  return { ...delivery, message: openReceived(bindEncryption(primitives), input.keys, delivery.message) }
}

/** Opens an encrypted message, or marks it with why it does not open; never throws. */
export function openReceived<T extends { sender_key: string; recipient_key: string; content_type: string; body?: unknown }>(
  e2e: Encryption,
  keys: AgentKeys,
  message: T,
): T & { encryption?: MessageEncryptionJson } {
  if (!isEncryptedMessage(message)) return message
  try {
    const opened = e2e.openMessage(keys, message as Parameters<Encryption['openMessage']>[1])
    return { ...message, content_type: opened.content_type, body: opened.body, encryption: opened.encryption }
  } catch (err) {
    const e = err instanceof DecryptError ? err : new DecryptError('malformed', (err as Error).message)
    const v = (message.body as { v?: unknown } | null)?.v
    return { ...message, encryption: { version: typeof v === 'number' ? v : 0, sender_verified: false, error: { reason: e.reason, message: e.message } } }
  }
}
