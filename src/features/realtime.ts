/**
 * Real-time delivery: WebSocket push on /v1/ws (SPEC §8) and durable, signed webhooks (SPEC §9).
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
import { WebhooksRepo } from '../storage/webhooks-repo.ts'
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
    { authenticator: ctx.authenticator, messages, events: ctx.events, clock, logger, onDelivered: () => delivered.inc({ channel: 'websocket' }) },
    { maxConnections: config.ws.maxConnections, pingIntervalMs: config.ws.pingIntervalMs, authTimeoutMs: config.ws.authTimeoutMs },
  )
  metrics.gauge({ ...METRICS.websocketConnections, collect: () => hub.authenticatedCount })
  ctx.health.component('websocket', () => hub.report())

  // --- webhooks ---
  const repo = new WebhooksRepo(ctx.db)
  const webhooks = new WebhooksService(repo, clock, { allowPrivateTargets: config.webhooks.allowPrivateTargets })
  const dispatcher = new WebhookDispatcher(
    {
      repo,
      messages,
      writes: ctx.writes,
      clock,
      logger,
      fetch: ctx.fetch,
      onAttempt: (outcome) => attempts.inc({ outcome }),
      onDelivered: (n) => delivered.inc({ channel: 'webhook' }, n),
    },
    config.webhooks,
  )
  // the delivery row is written in the transaction that inserts the message (crash-safe outbox); the
  // kick runs on a later turn of the event loop, after that commit
  messages.onInsert((row) => {
    if (webhooks.enqueueFor(row)) dispatcher.kick()
  })
  // SPEC §2.3: a suspended agent receives nothing on any channel (deleted agents lose their rows with the agent)
  ctx.events.on('agentGone', ({ publicKey, reason }) => {
    if (reason === 'suspended') repo.cancelDeliveries(publicKey)
  })
  ctx.scheduler.add(DISPATCH_WEBHOOKS_JOB, DISPATCH_INTERVAL_MS, () => {
    dispatcher.kick()
    return { in_flight: dispatcher.inFlightCount }
  })
  ctx.health.component('webhooks', () => ({ status: 'ok', queue_depth: repo.pendingCount(), in_flight: dispatcher.inFlightCount }))
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
    repo,
  }
}

export type RealtimeFeature = ReturnType<typeof installRealtime>
