/**
 * GET /v1/ws in the OpenAPI document (docs/protocol.md §8). A WebSocket handshake never reaches this route: Bun's
 * server hands it to the socket hub first. A plain signed GET gets a 400 saying how to connect.
 */
import { Elysia } from 'elysia'
import { routeAuth } from '../route-auth.ts'
import { RelayError } from '../../errors.ts'
import { doc } from '../openapi-docs.ts'

export function websocketRoutes() {
  return new Elysia({ name: 'routes-websocket' })
    .use(routeAuth).get(
    '/v1/ws',
    ({ caller, request }) => {
      caller
      throw new RelayError('bad_request', 'This is the WebSocket endpoint: connect with a WebSocket client (Upgrade: websocket)')
    },
    {
      auth: 'agent',
      detail: doc({
        tags: ['websocket'],
        summary: 'WebSocket: pushed messages, acks and sends (upgrade; JSON text frames)',
        description: [
          'Open a WebSocket (`ws://` or `wss://` behind a TLS proxy) without signature headers. Within 10 s send an auth frame ' +
            'whose `signature` signs the two lines `WS` and the timestamp (see WsAuthFrame). The relay answers an `auth_result`; ' +
            'on failure it closes with 4001, and with 4008 when no auth frame came in time.',
          'After `ok` the relay pushes every message still `sent` to you, oldest first, then each new one as it is accepted ' +
            '(WsMessageFrame). Ack each one (WsAckFrame) to mark it delivered; an unacked message is pushed again on the next ' +
            'connection. You may send messages over the socket (WsSendFrame, answered by WsSendResultFrame) and ping (WsPingFrame → ' +
            '`{"type":"pong"}`); a frame the relay cannot use gets WsErrorFrame and the connection stays.',
          'Frames are JSON text, at most 2 MiB (a larger one closes with 1009); at most 5 connections per agent. Close codes: ' +
            '4001 auth failed, 4008 no auth in time, 4003 agent suspended, 4004 agent deleted, 1001 relay stopping. ' +
            'A plain signed GET (no Upgrade) answers 400. Full reference: docs/protocol.md §8.',
        ].join('\n\n'),
        security: [],
        responses: { 101: { description: 'Switching protocols' } },
      }),
    },
  )
}
