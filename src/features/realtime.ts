/**
 * Real-time delivery over WebSocket (docs/protocol.md §8): the socket hub, the handshake on /v1/ws that
 * Bun's server hands it before the HTTP pipeline, and the route that documents it.
 */
import type { Server } from 'bun'
import { SocketHub } from '../delivery/ws-hub.ts'
import { errorResponse } from '../http/errors.ts'
import { websocketRoutes } from '../http/routes/websocket.ts'
import { newRequestId } from '../lib/ids.ts'
import { METRICS } from '../metrics/catalog.ts'
import { defineFeature, type FeatureContext } from './feature.ts'
import type { MessagesApi } from './messages.ts'

export function realtimeFeature(ctx: FeatureContext, { messages }: MessagesApi) {
  const { config, clock, logger, metrics } = ctx
  const delivered = metrics.counter(METRICS.messagesDelivered)
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

  return defineFeature({
    name: 'realtime',
    routes: websocketRoutes(),
    probes: { websocket: () => hub.report() },
    api: {
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
    },
  })
}
