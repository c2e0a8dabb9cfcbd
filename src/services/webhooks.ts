/**
 * Webhook registration (SPEC §9): owner-only PUT / GET / DELETE with the URL, secret and target rules,
 * and the step that queues a delivery for every message accepted for an agent with an enabled webhook.
 */
import { RelayError, badRequest } from '../errors.ts'
import type { Clock } from '../lib/clock.ts'
import { iso } from '../lib/clock.ts'
import { newDeliveryId } from '../lib/ids.ts'
import { decodeBase64Url } from '../lib/base64url.ts'
import { blockedAddressKind, isIpLiteral } from '../delivery/address-policy.ts'
import type { MessageRow } from '../storage/messages-repo.ts'
import type { WebhookRow, WebhooksRepo } from '../storage/webhooks-repo.ts'
import { WEBHOOK_LIMITS, WebhookPutInput, type WebhookConfigJson } from './models/webhook.ts'
import { validate } from './validate.ts'

/** The one serializer for a webhook configuration; the secret is never part of it. */
export function webhookToJson(row: WebhookRow): WebhookConfigJson {
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
    private readonly repo: WebhooksRepo,
    private readonly clock: Clock,
    private readonly opts: WebhooksServiceOptions,
  ) {}

  /**
   * Registers or replaces the caller's webhook: 403 for someone else's, 400 for a bad URL or secret,
   * 422 for a literal address in a refused range. A replacement is enabled with no failures.
   */
  put(caller: string, owner: string, body: unknown): WebhookRow {
    this.assertOwner(caller, owner)
    const input = validate(WebhookPutInput, body ?? undefined)
    const fields: Record<string, string> = {}
    const url = parseTargetUrl(input.url)
    if (typeof url === 'string') fields.url = url
    const secret = decodeBase64Url(input.secret)
    if (!secret || secret.length !== WEBHOOK_LIMITS.secretBytes) fields.secret = 'must be unpadded base64url of exactly 32 bytes (43 characters)'
    if (Object.keys(fields).length) throw badRequest('Invalid request body', fields)
    const host = (url as URL).hostname
    if (!this.opts.allowPrivateTargets && isIpLiteral(host)) {
      const kind = blockedAddressKind(host)
      if (kind) {
        throw new RelayError('unprocessable_entity', `Webhook target ${host} is a ${kind} address; this relay does not deliver to such targets`, {
          field: 'url',
          address: host,
          range: kind,
        })
      }
    }
    return this.repo.upsert(owner, input.url, input.secret, this.clock.now())
  }

  get(caller: string, owner: string): WebhookRow {
    this.assertOwner(caller, owner)
    const row = this.repo.find(owner)
    if (!row) throw new RelayError('not_found', 'No webhook is registered for this agent')
    return row
  }

  /** Removes the webhook and cancels its pending deliveries (one transaction); 404 when none. */
  delete(caller: string, owner: string): void {
    this.assertOwner(caller, owner)
    if (!this.repo.transaction(() => this.repo.delete(owner))) throw new RelayError('not_found', 'No webhook is registered for this agent')
  }

  /**
   * Runs inside the transaction that inserts a message: queues its delivery when the recipient has an
   * enabled webhook, so the message and its outbox entry are committed together (or not at all).
   */
  enqueueFor(row: MessageRow): boolean {
    if (!this.repo.isEnabled(row.recipientKey)) return false
    this.repo.enqueue(newDeliveryId(), row.recipientKey, row.messageId, row.createdAt)
    return true
  }

  private assertOwner(caller: string, owner: string): void {
    if (caller !== owner) throw new RelayError('forbidden', 'Only the agent itself may read or change its webhook')
  }
}

/** The URL when it is an absolute http(s) URL with a host, else what is wrong with it. */
function parseTargetUrl(text: string): URL | string {
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
