/**
 * /v1/messages (docs/protocol.md §4.2). The messages service validates bodies and queries itself (the same checks
 * serve WebSocket frames, and docs/protocol.md §4.3 puts the 413 body check before the 400 shape check), so these
 * routes carry their schemas as documentation only.
 */
import { Elysia } from 'elysia'
import { routeAuth } from '../route-auth.ts'
import { stringifyJson } from '../../lib/json-text.ts'
import type { MessagesService } from '../../services/messages.ts'
import { MESSAGE_LIMITS, Message, MessagePage, MessageStatusResult, SendMessageInput, SendResult } from '../../services/models/message.ts'
import { doc, jsonBody, jsonResponse, pathParam, queryParams, rateLimitHeaders } from '../openapi-docs.ts'
import { rawQuery } from '../query.ts'

const pageParams = {
  cursor: { description: 'opaque, from next_cursor', schema: { type: 'string' } },
  limit: {
    description: `1–${MESSAGE_LIMITS.pageMax}, default ${MESSAGE_LIMITS.pageDefault}`,
    schema: { type: 'integer', minimum: 1, maximum: MESSAGE_LIMITS.pageMax },
  },
}

/** Messages and pages of them, with each `body` and `metadata` spliced in exactly as sent. */
const exactJson = (value: unknown) => new Response(stringifyJson(value), { headers: { 'content-type': 'application/json;charset=utf-8' } })

export function messageRoutes(messages: MessagesService) {
  return new Elysia({ name: 'routes-messages' })
    .use(routeAuth)
    .post(
      '/v1/messages',
      async ({ caller, request, body, set }) => {
        const { rate, ...result } = await messages.send(caller, body)
        Object.assign(set.headers, rate.headers)
        set.status = 201
        return result
      },
      {
        auth: { mode: 'agent', ownLimit: true },
        detail: doc({
          tags: ['messages'],
          summary: 'Send a message',
          description:
            'Checks in order: 413 (request > 2 MiB or body > 1 MiB serialized), 400, 422 (neither body nor attachments; ' +
            'unusable attachments), 429, 403 forbidden (suspended recipient), 403 acl_denied. Answers once the message is committed.',
          requestBody: jsonBody(SendMessageInput),
          responses: { 201: jsonResponse(SendResult, 'Accepted', rateLimitHeaders) },
        }),
      },
    )
    .get(
      '/v1/messages',
      async ({ caller, request, set }) => {
        const { rate, ...page } = await messages.poll(caller.publicKey, rawQuery(request))
        Object.assign(set.headers, rate.headers)
        return exactJson(page)
      },
      {
        auth: { mode: 'agent', ownLimit: true },
        detail: doc({
          tags: ['messages'],
          summary: 'Poll your inbox, oldest first (returned sent messages become delivered)',
          parameters: queryParams({
            ...pageParams,
            status: { description: 'sent (default), delivered or expired', schema: { type: 'string', enum: ['sent', 'delivered', 'expired'] } },
            sender_key: { description: 'only from this sender', schema: { type: 'string' } },
            in_reply_to: { description: 'only replies to this message id', schema: { type: 'string' } },
            thread_id: { description: 'only this thread', schema: { type: 'string' } },
          }),
          responses: { 200: jsonResponse(MessagePage, 'One page', rateLimitHeaders) },
        }),
      },
    )
    .get(
      '/v1/messages/threads/:threadID',
      async ({ caller, request, params }) => exactJson(await messages.thread(caller.publicKey, params.threadID, rawQuery(request))),
      {
        auth: 'agent',
        detail: doc({
          tags: ['messages'],
          summary: 'Messages of a thread that you sent or received, oldest first',
          parameters: [pathParam('threadID'), ...queryParams(pageParams)],
          responses: { 200: jsonResponse(MessagePage, 'One page') },
        }),
      },
    )
    .get('/v1/messages/:messageID', async ({ caller, request, params }) => exactJson(await messages.get(caller.publicKey, params.messageID)), {
      auth: 'agent',
      detail: doc({
        tags: ['messages'],
        summary: 'Read a message (sender or recipient; the recipient reading it marks it delivered)',
        parameters: [pathParam('messageID')],
        responses: { 200: jsonResponse(Message, 'The message') },
      }),
    })
    .get(
      '/v1/messages/:messageID/status',
      async ({ caller, request, params }) => await messages.status(caller.publicKey, params.messageID),
      {
        auth: 'agent',
        detail: doc({
          tags: ['messages'],
          summary: 'Delivery status of a message (sender or recipient)',
          parameters: [pathParam('messageID')],
          responses: { 200: jsonResponse(MessageStatusResult, 'Status') },
        }),
      },
    )
}
