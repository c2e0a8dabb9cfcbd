/**
 * GET /v1/ws in the OpenAPI document (SPEC §8). A WebSocket handshake never reaches this route: Bun's
 * server hands it to the socket hub first. A plain signed GET gets a 400 saying how to connect.
 */
import { Elysia } from 'elysia'
import { RelayError } from '../../errors.ts'
import { callerOf } from '../app.ts'
import { doc, errorResponses } from '../openapi-docs.ts'

export function websocketRoutes() {
  return new Elysia({ name: 'routes-websocket' }).get(
    '/v1/ws',
    ({ request }) => {
      callerOf(request)
      throw new RelayError('bad_request', 'This is the WebSocket endpoint: connect with a WebSocket client (Upgrade: websocket)')
    },
    {
      detail: doc({
        tags: ['websocket'],
        summary: 'WebSocket: pushed messages, acks and sends (upgrade; JSON text frames)',
        description:
          'Upgrade without signature headers, then send within 10 s {"type":"auth","public_key","timestamp","signature"} signing ' +
          '"WS\\n" + timestamp. The relay answers {"type":"auth_result","status":"ok"|"error"} (error: close 4001; no auth: 4008), ' +
          'pushes every sent, unexpired message oldest first and then each new one as {"type":"message","message":Message}. ' +
          'Client frames: {"type":"ack","message_id"}, {"type":"send","id","message":{…POST /v1/messages body…}} answered by ' +
          '{"type":"send_result","id",…}, {"type":"ping"} answered by {"type":"pong"}; anything else gets an error frame. ' +
          'Frames ≤ 2 MiB; at most 5 connections per agent; close codes 4003 suspended, 4004 deleted, 1001 relay stopping.',
        security: [],
        responses: { 101: { description: 'Switching protocols' }, ...errorResponses(400, 401) },
      }),
    },
  )
}
