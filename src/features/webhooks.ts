/**
 * Durable, signed webhooks (docs/protocol.md §9): the webhook routes and service, the outbox dispatcher
 * and its job. The outbox row is written in the unit of work that inserts the message, so a message and
 * its delivery commit together.
 */
import { WebhookDispatcher } from '../delivery/webhook-dispatcher.ts'
import { webhookRoutes } from '../http/routes/webhooks.ts'
import { METRICS } from '../metrics/catalog.ts'
import { WebhooksService } from '../services/webhooks.ts'
import { defineFeature, type FeatureContext } from './feature.ts'

export const DISPATCH_WEBHOOKS_JOB = 'dispatch-webhooks'
/** Retries and restarts are picked up this often; new messages start their first attempt at once. */
const DISPATCH_INTERVAL_MS = 1000
/** How long a graceful stop lets webhook attempts in flight finish before re-queueing them. */
const STOP_GRACE_MS = 2000
/** Ids of units of work that rolled back are forgotten past this many; the periodic job covers them. */
const QUEUED_IDS_MAX = 10_000

export function webhooksFeature(ctx: FeatureContext) {
  const { config, clock, logger, metrics, storage } = ctx
  const delivered = metrics.counter(METRICS.messagesDelivered)
  const attempts = metrics.counter(METRICS.webhookAttempts)
  const webhooks = new WebhooksService(storage, clock, { allowPrivateTargets: config.webhooks.allowPrivateTargets })
  const dispatcher = new WebhookDispatcher(
    {
      storage,
      clock,
      logger,
      fetch: ctx.fetch,
      onAttempt: (outcome) => attempts.inc({ outcome }),
      onDelivered: (n) => delivered.inc({ channel: 'webhook' }, n),
    },
    config.webhooks,
  )
  // the dispatcher is kicked once the commit of a message that queued a delivery is announced. A message
  // committed by another instance may have queued a delivery too: any instance with a free slot takes it
  // (claims are exclusive).
  const queued = new Set<string>()

  return defineFeature({
    name: 'webhooks',
    routes: webhookRoutes(webhooks),
    jobs: [
      {
        name: DISPATCH_WEBHOOKS_JOB,
        intervalMs: DISPATCH_INTERVAL_MS,
        run: () => {
          dispatcher.kick()
          return { in_flight: dispatcher.inFlightCount }
        },
      },
    ],
    probes: { webhooks: async () => ({ status: 'ok', queue_depth: await storage.webhooks.pendingCount(), in_flight: dispatcher.inFlightCount }) },
    on: {
      messageInserting: async (tx, row) => {
        if (!(await webhooks.enqueueFor(tx, row))) return
        if (queued.size >= QUEUED_IDS_MAX) queued.clear()
        queued.add(row.messageId)
      },
      messageCommitted: (message, origin) => {
        if (origin === 'remote' || queued.delete(message.messageId)) dispatcher.kick()
      },
      // docs/protocol.md §2.3: a suspended agent receives nothing on any channel — with the suspension when
      // it is made here, and as soon as this relay hears of one made elsewhere (relay admin, another instance)
      agentSuspending: async (tx, publicKey) => {
        await tx.webhooks.cancelDeliveries(publicKey)
      },
      agentGone: (publicKey, reason) => {
        if (reason !== 'suspended') return
        storage.webhooks.cancelDeliveries(publicKey).catch((err) => logger.warn('cancelling webhook deliveries failed', { agent: publicKey, error: String(err) }))
      },
      // docs/protocol.md §2.2: a deleted agent's webhook and pending deliveries go with it
      agentDeleting: (tx, publicKey) => tx.webhooks.removeFor(publicKey),
    },
    stop: () => dispatcher.stop(STOP_GRACE_MS),
    api: { webhooks, dispatcher },
  })
}
