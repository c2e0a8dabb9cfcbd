/**
 * Real-time delivery: WebSocket push on /v1/ws (docs/protocol.md §8) and durable, signed webhooks (docs/protocol.md §9).
 * Builds the socket hub, the webhook routes and service, the outbox dispatcher and its job, and hooks
 * the outbox into the message insert so that a message and its delivery commit together.
 */
import { WebhookDispatcher } from '../delivery/webhook-dispatcher.ts'
import { SocketHub } from '../delivery/ws-hub.ts'
import type { Server } from 'bun'
import { Elysia } from 'elysia'
import { errorResponse } from '../http/errors.ts'
import { newRequestId } from '../lib/ids.ts'
import { websocketRoutes } from '../http/routes/websocket.ts'
import { webhookRoutes } from '../http/routes/webhooks.ts'
import { METRICS } from '../metrics/catalog.ts'
import type { FeatureContext } from '../relay.ts'
import { WebhooksService } from '../services/webhooks.ts'
import type { MessagesFeature } from './messages.ts'

export const DISPATCH_WEBHOOKS_JOB = 'dispatch-webhooks'
/** Retries and restarts are picked up this often; new messages start their first attempt at once. */
const DISPATCH_INTERVAL_MS = 1000
/** How long a graceful stop lets webhook attempts in flight finish before re-queueing them. */
const STOP_GRACE_MS = 2000

export function installRealtime(ctx: FeatureContext, messagesFeature: MessagesFeature) {
  const { config, clock, logger, metrics } = ctx
  const { messages } = messagesFeature
  const delivered = metrics.counter(METRICS.messagesDelivered)
  const attempts = metrics.counter(METRICS.webhookAttempts)

  // --- WebSocket ---
  const hub = new SocketHub(
    {
      authenticator: ctx.authenticator,
      messages,
      signals: ctx.signals,
      connections: ctx.connections,
      clock,
      logger,
      preauth: ctx.preauth,
      onDelivered: () => delivered.inc({ channel: 'websocket' }),
    },
    {
      maxConnections: config.ws.maxConnections,
      pingIntervalMs: config.ws.pingIntervalMs,
      authTimeoutMs: config.ws.authTimeoutMs,
      preauthSocketsPerAddress: config.ws.preauthPerAddress,
      preauthSockets: config.ws.preauthMax,
    },
  )
  metrics.gauge({ ...METRICS.websocketConnections, collect: () => hub.authenticatedCount })
  ctx.health.component('websocket', () => hub.report())

  // --- webhooks ---
  const storage = ctx.storage
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
  // the delivery row is written in the unit of work that inserts the message (crash-safe outbox); the
  // dispatcher is kicked once that commit is announced. A message committed by another instance may
  // have queued a delivery too: any instance with a free slot takes it (claims are exclusive).
  const queued = new Set<string>()
  messages.onInsert(async (tx, row) => {
    if (!(await webhooks.enqueueFor(tx, row))) return
    if (queued.size >= 10_000) queued.clear() // ids of units of work that rolled back; the periodic job covers them
    queued.add(row.messageId)
  })
  ctx.signals.onMessage((message, origin) => {
    if (origin === 'remote' || queued.delete(message.messageId)) dispatcher.kick()
  })
  // docs/protocol.md §2.3: a suspended agent receives nothing on any channel — with the suspension when it
  // is made here, and as soon as this relay hears of one made elsewhere (relay admin, another instance)
  ctx.agents.onSuspend(async (tx, publicKey) => {
    await tx.webhooks.cancelDeliveries(publicKey)
  })
  ctx.signals.onAgentGone((publicKey, reason) => {
    if (reason === 'suspended') {
      storage.webhooks.cancelDeliveries(publicKey).catch((err) => logger.warn('cancelling webhook deliveries failed', { agent: publicKey, error: String(err) }))
    }
  })
  // docs/protocol.md §2.2: a deleted agent's webhook and pending deliveries go with it
  ctx.agents.onDelete((tx, publicKey) => tx.webhooks.removeFor(publicKey))
  ctx.scheduler.add(DISPATCH_WEBHOOKS_JOB, DISPATCH_INTERVAL_MS, () => {
    dispatcher.kick()
    return { in_flight: dispatcher.inFlightCount }
  })
  ctx.health.component('webhooks', async () => ({ status: 'ok', queue_depth: await storage.webhooks.pendingCount(), in_flight: dispatcher.inFlightCount }))
  ctx.onStop.push(() => dispatcher.stop(STOP_GRACE_MS))

  return {
    routes: new Elysia({ name: 'feature-realtime' }).use(websocketRoutes()).use(webhookRoutes(webhooks)),
    /**
     * For Bun.serve's fetch: a handshake on /v1/ws is upgraded (undefined) or refused (an error response);
     * null for every other request, which the HTTP pipeline answers.
     */
    upgrade(request: Request, server: Server<any>): Response | undefined | null {
      const result = hub.upgrade(request, server)
      if (result === null) return null
      return result === true ? undefined : errorResponse(result, newRequestId())
    },
    websocket: hub.websocket,
    /** Graceful stop, before the server stops: every socket closed with 1001. */
    closeSockets: () => hub.closeAll(),
    hub,
    webhooks,
    dispatcher,
  }
}

export type RealtimeFeature = ReturnType<typeof installRealtime>
