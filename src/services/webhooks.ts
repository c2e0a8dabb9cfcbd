/**
 * Webhook registration (docs/protocol.md §9): owner-only PUT / GET / DELETE with the URL, secret and target rules,
 * and the step that queues a delivery for every message accepted for an agent with an enabled webhook.
 */
import { RelayError, badRequest } from '../errors.ts'
import type { Clock } from '../lib/clock.ts'
import { iso } from '../lib/clock.ts'
import { newDeliveryId } from '../lib/ids.ts'
import { decodeBase64Url } from '../lib/base64url.ts'
import { PRIVATE_TARGETS_HINT, blockedAddressKind, isIpLiteral, isLocalhostName } from '../delivery/address-policy.ts'
import type { MessageRecord, WebhookRecord } from './models/records.ts'
import type { Storage, Stores } from './ports.ts'
import { WEBHOOK_LIMITS, WebhookPutInput, type WebhookConfigJson } from './models/webhook.ts'
import { validate } from './validate.ts'

/** The one serializer for a webhook configuration; the secret is never part of it. */
export function webhookToJson(row: WebhookRecord): WebhookConfigJson {
  return {
    url: row.url,
    enabled: row.enabled,
    consecutive_failures: row.consecutiveFailures,
    created_at: iso(row.createdAt),
    updated_at: iso(row.updatedAt),
  }
}

export interface WebhooksServiceOptions {
  /** `webhooks.allowPrivateTargets`: accept loopback and private targets (home labs). */
  allowPrivateTargets: boolean
}

export class WebhooksService {
  constructor(
    private readonly storage: Storage,
    private readonly clock: Clock,
    private readonly opts: WebhooksServiceOptions,
  ) {}

  /**
   * Registers or replaces the caller's webhook: 403 for someone else's, 400 for a bad URL or secret,
   * 422 for a literal address in a refused range or a loopback name (`localhost`, `*.localhost`,
   * `ip6-localhost`, …) — names that can only ever resolve to this machine. A replacement is enabled
   * with no failures.
   */
  async put(caller: string, owner: string, body: unknown): Promise<WebhookRecord> {
    this.assertOwner(caller, owner)
    const input = validate(WebhookPutInput, body ?? undefined)
    const fields: Record<string, string> = {}
    const url = parseTargetUrl(input.url)
    if (typeof url === 'string') fields.url = url
    const secret = decodeBase64Url(input.secret)
    if (!secret || secret.length !== WEBHOOK_LIMITS.secretBytes) fields.secret = 'must be unpadded base64url of exactly 32 bytes (43 characters)'
    if (Object.keys(fields).length) throw badRequest('Invalid request body', fields)
    const host = (url as URL).hostname
    if (!this.opts.allowPrivateTargets && isLocalhostName(host)) {
      throw new RelayError('unprocessable_entity', `Webhook target ${host} is a loopback name; this relay does not deliver to such targets (${PRIVATE_TARGETS_HINT})`, {
        field: 'url',
        address: host,
        range: 'loopback',
      })
    }
    if (!this.opts.allowPrivateTargets && isIpLiteral(host)) {
      const kind = blockedAddressKind(host)
      if (kind) {
        throw new RelayError('unprocessable_entity', `Webhook target ${host} is a ${kind} address; this relay does not deliver to such targets (${PRIVATE_TARGETS_HINT})`, {
          field: 'url',
          address: host,
          range: kind,
        })
      }
    }
    return this.storage.webhooks.upsert(owner, input.url, input.secret, this.clock.now())
  }

  async get(caller: string, owner: string): Promise<WebhookRecord> {
    this.assertOwner(caller, owner)
    const row = await this.storage.webhooks.find(owner)
    if (!row) throw new RelayError('not_found', 'No webhook is registered for this agent')
    return row
  }

  /** Removes the webhook and cancels its pending deliveries (one transaction); 404 when none. */
  async delete(caller: string, owner: string): Promise<void> {
    this.assertOwner(caller, owner)
    if (!(await this.storage.webhooks.delete(owner))) throw new RelayError('not_found', 'No webhook is registered for this agent')
  }

  /**
   * Runs inside the transaction that inserts a message: queues its delivery when the recipient has an
   * enabled webhook, so the message and its outbox entry are committed together (or not at all).
   */
  async enqueueFor(tx: Stores, row: MessageRecord): Promise<boolean> {
    if (!(await tx.webhooks.isEnabled(row.recipientKey))) return false
    await tx.webhooks.enqueue(newDeliveryId(), row.recipientKey, row.messageId, row.createdAt)
    return true
  }

  private assertOwner(caller: string, owner: string): void {
    if (caller !== owner) throw new RelayError('forbidden', 'Only the agent itself may read or change its webhook')
  }
}

/** White space and control characters: the URL parser would drop or encode some silently. */
const UNSAFE_IN_URL = /[\s\p{Cc}]/u

/**
 * The URL when it is an absolute http(s) URL with a host, else what is wrong with it. Spaces and
 * control characters (CR, LF, NUL, …) are refused rather than stored and echoed: send them
 * percent-encoded.
 */
function parseTargetUrl(text: string): URL | string {
  if (UNSAFE_IN_URL.test(text)) return 'must not contain spaces or control characters (percent-encode them)'
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return 'must be an absolute http or https URL'
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'must use http or https'
  if (!url.hostname) return 'must name a host'
  return url
}
