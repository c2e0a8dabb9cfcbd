/** /v1/agents/{publicKey}/webhook (docs/protocol.md §9): owner only; the webhooks service validates bodies. */
import { Elysia } from 'elysia'
import { routeAuth } from '../route-auth.ts'
import { KeyOrMe } from '../../services/models/agent.ts'
import { WebhookConfig, WebhookPutInput } from '../../services/models/webhook.ts'
import { webhookToJson, type WebhooksService } from '../../services/webhooks.ts'
import { doc, jsonBody, jsonResponse, pathParam } from '../openapi-docs.ts'

const key = [pathParam('publicKey', KeyOrMe)]

export function webhookRoutes(webhooks: WebhooksService) {
  return new Elysia({ name: 'routes-webhooks' })
    .use(routeAuth)
    .put('/v1/agents/:publicKey/webhook', async ({ caller, request, params, body }) => webhookToJson(await webhooks.put(caller.publicKey, params.publicKey, body)), {
      auth: 'agent',
      detail: doc({
        tags: ['webhooks'],
        summary: 'Register or replace your webhook (enabled, failure count reset)',
        description:
          'The relay POSTs {delivery_id, message} for every message accepted for you, signed with X-M2M-Webhook-Signature ' +
          '(hex HMAC-SHA256 of the raw body keyed with the 32 secret bytes). 422 for a literal loopback or private target.',
        parameters: key,
        requestBody: jsonBody(WebhookPutInput),
        responses: { 200: jsonResponse(WebhookConfig, 'The webhook configuration (never the secret)') },
      }),
    })
    .get('/v1/agents/:publicKey/webhook', async ({ caller, request, params }) => webhookToJson(await webhooks.get(caller.publicKey, params.publicKey)), {
      auth: 'agent',
      detail: doc({
        tags: ['webhooks'],
        summary: 'Your webhook configuration',
        parameters: key,
        responses: { 200: jsonResponse(WebhookConfig, 'The webhook configuration (never the secret)') },
      }),
    })
    .delete(
      '/v1/agents/:publicKey/webhook',
      async ({ caller, request, params, set }) => {
        await webhooks.delete(caller.publicKey, params.publicKey)
        set.status = 204
        return null
      },
      {
        auth: 'agent',
        detail: doc({
          tags: ['webhooks'],
          summary: 'Remove your webhook; pending deliveries are cancelled',
          parameters: key,
          responses: { 204: { description: 'Removed' } },
        }),
      },
    )
}
