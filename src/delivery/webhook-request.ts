/**
 * One webhook attempt (docs/protocol.md §9): the exact body, its HMAC, the headers, the target check after DNS
 * resolution, and the POST itself with a deadline and no redirects. Returns an outcome, never throws.
 */
import { createHmac } from 'node:crypto'
import { lookup as dnsLookup } from 'node:dns/promises'
import { iso } from '../lib/clock.ts'
import { stringifyJson } from '../lib/json-text.ts'
import type { Logger } from '../lib/logger.ts'
import type { MessageRecord } from '../services/models/records.ts'
import { messageToJson } from '../services/messages-json.ts'
import type { WebhookDeliveryJson } from '../services/models/webhook.ts'
import { PRIVATE_TARGETS_HINT, blockedAddressKind, isIpLiteral, isLocalhostName } from './address-policy.ts'

/** Labels of relay_webhook_attempts_total (src/metrics/catalog.ts). */
export type AttemptOutcome = 'success' | 'http_error' | 'timeout' | 'network_error' | 'refused'

export interface AttemptResult {
  outcome: AttemptOutcome | 'aborted'
  /** HTTP status when the receiver answered. */
  status?: number
  /** What went wrong, for last_error (never shown to agents). */
  error?: string
}

/** Resolves a host name to its addresses (all of them, so that one bad address is seen). */
export type Resolver = (hostname: string) => Promise<{ address: string; family: number }[]>

export const systemResolver: Resolver = (hostname) => dnsLookup(hostname, { all: true, verbatim: true })

/**
 * The delivery body: `{delivery_id, message}` with the message fields of docs/protocol.md §9 in docs/protocol.md §4.1 order.
 * As everywhere a message is received: `attachments` always an array (metadata only, `[]` when there are
 * none), `thread_id`, `in_reply_to` and `metadata` `null` when unset. `body` and `metadata`
 * are the sender's JSON text, spliced in unchanged (the HMAC covers exactly these bytes).
 */
export function deliveryBody(deliveryId: string, row: MessageRecord, now: number): string {
  const m = messageToJson(row, now) as unknown as Record<string, unknown>
  const message: Record<string, unknown> = {
    message_id: m.message_id,
    sender_key: m.sender_key,
    recipient_key: m.recipient_key,
    content_type: m.content_type,
  }
  if (m.body !== undefined) message.body = m.body
  message.attachments = m.attachments
  message.thread_id = m.thread_id
  message.in_reply_to = m.in_reply_to
  message.metadata = m.metadata
  message.created_at = m.created_at
  message.expires_at = m.expires_at
  return stringifyJson({ delivery_id: deliveryId, message } satisfies Record<keyof WebhookDeliveryJson, unknown>)
}

/** Hex HMAC-SHA256 of the raw body keyed with the 32 bytes the secret encodes. */
export function signDelivery(secretBytes: Uint8Array, rawBody: string): string {
  return createHmac('sha256', secretBytes).update(rawBody).digest('hex')
}

export interface AttemptInput {
  fetch: typeof fetch
  url: string
  body: string
  secretBytes: Uint8Array
  deliveryId: string
  now: number
  timeoutMs: number
  allowPrivateTargets: boolean
  resolve: Resolver
  /** Aborts the attempt without an outcome (a stopping relay). */
  signal?: AbortSignal
  /** Failed attempts are logged here at warn, with the delivery id and the reason. */
  logger?: Logger
}

/** Bytes of a response body read to let the connection be reused; larger answers are cut off. */
const MAX_DRAIN_BYTES = 64 * 1024

class Timeout extends Error {}

/**
 * Where to connect: the URL itself when private targets are allowed; otherwise the address the host
 * resolves to, checked, and pinned — the request goes to that address (with the original Host header
 * and, for https, the original name for SNI and certificate checks), so a second lookup cannot
 * answer differently (DNS rebinding).
 */
async function target(input: AttemptInput): Promise<{ url: string; host?: string; serverName?: string } | AttemptResult> {
  const url = new URL(input.url)
  if (input.allowPrivateTargets) return { url: input.url }
  const host = url.hostname
  if (isIpLiteral(host)) {
    const kind = blockedAddressKind(host)
    return kind ? { outcome: 'refused', error: `target ${host} is a ${kind} address (${PRIVATE_TARGETS_HINT})` } : { url: input.url }
  }
  if (isLocalhostName(host)) return { outcome: 'refused', error: `target ${host} is a loopback name (${PRIVATE_TARGETS_HINT})` }
  let addresses: { address: string; family: number }[]
  try {
    addresses = await input.resolve(host)
  } catch (err) {
    return { outcome: 'network_error', error: `cannot resolve ${host}: ${(err as Error)?.message ?? String(err)}` }
  }
  if (addresses.length === 0) return { outcome: 'network_error', error: `${host} has no address` }
  for (const a of addresses) {
    const kind = blockedAddressKind(a.address)
    if (kind) return { outcome: 'refused', error: `${host} resolves to ${a.address}, a ${kind} address (${PRIVATE_TARGETS_HINT})` }
  }
  const chosen = addresses[0]
  const pinned = new URL(input.url)
  pinned.hostname = chosen.family === 6 ? `[${chosen.address}]` : chosen.address
  return { url: pinned.toString(), host: url.host, serverName: url.protocol === 'https:' ? host : undefined }
}

/**
 * Makes one attempt; resolves with its outcome once the receiver answered or the deadline passed. A
 * failed attempt is logged at warn (delivery id, outcome, status, reason) so an operator can see why a
 * receiver gets nothing; the answer body is never logged.
 */
export async function attemptDelivery(input: AttemptInput): Promise<AttemptResult> {
  const result = await attemptOnce(input)
  if (result.outcome !== 'success' && result.outcome !== 'aborted') {
    input.logger?.warn('webhook attempt failed', {
      delivery_id: input.deliveryId,
      outcome: result.outcome,
      status: result.status,
      error: result.error,
    })
  }
  return result
}

async function attemptOnce(input: AttemptInput): Promise<AttemptResult> {
  const controller = new AbortController()
  const timer = setTimeout(() => controller.abort(new Timeout('timeout')), input.timeoutMs)
  const onStop = () => controller.abort(new Error('stopping'))
  input.signal?.addEventListener('abort', onStop, { once: true })
  const deadline = new Promise<never>((_, reject) => controller.signal.addEventListener('abort', () => reject(controller.signal.reason), { once: true }))
  deadline.catch(() => {})
  try {
    const to = await Promise.race([target(input), deadline])
    if ('outcome' in to) return to
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'x-m2m-webhook-signature': signDelivery(input.secretBytes, input.body),
      'x-m2m-webhook-timestamp': iso(input.now),
      'x-m2m-delivery-id': input.deliveryId,
      'user-agent': 'agent-relay-webhook',
    }
    if (to.host) headers.host = to.host
    const init: RequestInit & { tls?: { serverName: string } } = {
      method: 'POST',
      body: input.body,
      headers,
      redirect: 'manual',
      signal: controller.signal,
    }
    if (to.serverName) init.tls = { serverName: to.serverName }
    const res = await input.fetch(to.url, init)
    await drain(res)
    if (res.status >= 200 && res.status < 300) return { outcome: 'success', status: res.status }
    const what = res.status >= 300 && res.status < 400 ? `redirect ${res.status} not followed` : `HTTP ${res.status}`
    return { outcome: 'http_error', status: res.status, error: what }
  } catch (err) {
    const reason = controller.signal.reason
    if (controller.signal.aborted && reason instanceof Timeout) return { outcome: 'timeout', error: `no answer within ${input.timeoutMs} ms` }
    if (controller.signal.aborted) return { outcome: 'aborted', error: 'relay stopping' }
    return { outcome: 'network_error', error: (err as Error)?.message ?? String(err) }
  } finally {
    clearTimeout(timer)
    input.signal?.removeEventListener('abort', onStop)
  }
}

/** Reads a small answer so the connection can be reused; gives up on large or slow ones. */
async function drain(res: Response): Promise<void> {
  const length = Number(res.headers.get('content-length') ?? NaN)
  try {
    if (Number.isFinite(length) && length <= MAX_DRAIN_BYTES) await res.arrayBuffer()
    else await res.body?.cancel()
  } catch {
    // the answer's status is what counts
  }
}
