/**
 * /v1/admin/… (docs/protocol.md, "Operator API"): the operator's actions over HTTP, signed like every
 * request and allowed only to the keys of RELAY_ADMIN_KEYS (everyone else 403 `forbidden`). The
 * AdminService does the work, the same one `relay admin` uses.
 */
import { Elysia } from 'elysia'
import { routeAuth } from '../route-auth.ts'
import { badRequest } from '../../errors.ts'
import type { AdminService } from '../../services/admin.ts'
import { AdminAgent, AdminAgentPage, AdminStats, AdminSuspendInput, AllowInput, AllowResult, AllowedKeyList, RecentErrors, TrafficSeries, WebhookQueue } from '../../services/models/admin.ts'
import { jsonKind } from '../../services/validate.ts'
import { doc, jsonBody, jsonResponse, pathParam, queryParams } from '../openapi-docs.ts'
import { rawQuery } from '../query.ts'

const TAG = ['admin']
const key = [pathParam('publicKey', { type: 'string', description: 'public key, 43 base64url characters' })]

/** A single-valued query parameter, or undefined; a repeated one is a 400. */
function one(query: Record<string, string | string[]>, name: string): string | undefined {
  const v = query[name]
  if (Array.isArray(v)) throw badRequest(`${name} may be given once`, { [name]: 'given more than once' })
  return v
}

function intParam(query: Record<string, string | string[]>, name: string): number | undefined {
  const v = one(query, name)
  if (v === undefined) return undefined
  if (!/^\d{1,6}$/.test(v)) throw badRequest(`${name} must be a positive integer`, { [name]: 'expected a positive integer' })
  return Number(v)
}

/** The body as an object (absent → empty). */
function objectBody(body: unknown): Record<string, unknown> {
  if (body === undefined || body === null) return {}
  if (typeof body !== 'object' || Array.isArray(body)) throw badRequest('Invalid request body', { body: `must be a JSON object ({…}), not ${jsonKind(body)}` })
  return body as Record<string, unknown>
}

/** The members of `body` named in `allowed`; any other field is ignored, as on every endpoint (docs/protocol.md). */
function only(body: Record<string, unknown>, allowed: string[]): Record<string, any> {
  const out: Record<string, unknown> = {}
  for (const name of allowed) if (Object.hasOwn(body, name)) out[name] = body[name]
  return out
}

export function adminRoutes(admin: AdminService) {
  return new Elysia({ name: 'routes-admin' })
    .use(routeAuth)
    .get('/v1/admin/stats', () => admin.stats(), {
      auth: 'operator',
      detail: doc({
        tags: TAG,
        summary: 'Figures of the whole relay: agents, messages by status, blobs, webhooks, database size',
        responses: { 200: jsonResponse(AdminStats, 'The figures') },
      }),
    })
    .get(
      '/v1/admin/agents',
      ({ request }) => {
        const q = rawQuery(request)
        return admin.listAgents({ status: one(q, 'status'), cursor: one(q, 'cursor'), limit: intParam(q, 'limit') })
      },
      {
        auth: 'operator',
        detail: doc({
          tags: TAG,
          summary: 'Every agent with its status, oldest first, paged',
          parameters: queryParams({
            status: { description: 'only agents with this status', schema: { type: 'string', enum: ['active', 'suspended'] } },
            cursor: { description: 'next_cursor of the previous page', schema: { type: 'string' } },
            limit: { description: 'agents per page, 1–10000 (default 100)', schema: { type: 'integer', minimum: 1, maximum: 10000 } },
          }),
          responses: { 200: jsonResponse(AdminAgentPage, 'One page') },
        }),
      },
    )
    .post(
      '/v1/admin/agents/:publicKey/suspend',
      ({ params, body }) => {
        const input = only(objectBody(body), ['reason'])
        return admin.suspend(params.publicKey, input.reason ?? null, 'api')
      },
      {
        auth: 'operator',
        detail: doc({
          tags: TAG,
          summary: 'Suspend an agent: its requests are refused, its sockets closed, its webhook deliveries cancelled',
          description: 'An unknown key gets a suspended record, so it cannot become an agent until unsuspended.',
          parameters: key,
          requestBody: { ...jsonBody(AdminSuspendInput), required: false },
          responses: { 200: jsonResponse(AdminAgent, 'The agent, suspended') },
        }),
      },
    )
    .post(
      '/v1/admin/agents/:publicKey/unsuspend',
      ({ params, body }) => {
        objectBody(body)
        return admin.unsuspend(params.publicKey)
      },
      {
        auth: 'operator',
        detail: doc({
          tags: TAG,
          summary: 'Lift a suspension',
          parameters: key,
          responses: { 200: jsonResponse(AdminAgent, 'The agent, active again') },
        }),
      },
    )
    .get('/v1/admin/admission', async () => ({ allowed: await admin.allowed() }), {
      auth: 'operator',
      detail: doc({
        tags: TAG,
        summary: 'The admission allowlist (what RELAY_ADMISSION=allowlist admits), oldest first',
        responses: { 200: jsonResponse(AllowedKeyList, 'Every listed key') },
      }),
    })
    .post(
      '/v1/admin/admission',
      async ({ body, set }) => {
        const input = only(objectBody(body), ['public_key', 'note'])
        const result = await admin.allow(input.public_key, input.note ?? null)
        if (result.added) set.status = 201
        return result
      },
      {
        auth: 'operator',
        detail: doc({
          tags: TAG,
          summary: 'Admit a key (add it to the allowlist)',
          requestBody: jsonBody(AllowInput),
          responses: {
            200: jsonResponse(AllowResult, 'The key was listed already'),
            201: jsonResponse(AllowResult, 'The key is now listed'),
          },
        }),
      },
    )
    .delete(
      '/v1/admin/admission/:publicKey',
      async ({ params, set }) => {
        await admin.revoke(params.publicKey)
        set.status = 204
        return null
      },
      {
        auth: 'operator',
        detail: doc({
          tags: TAG,
          summary: 'Take a key off the allowlist',
          parameters: key,
          responses: { 204: { description: 'Removed' } },
        }),
      },
    )
    .get('/v1/admin/webhooks', ({ request }) => admin.webhookQueue(intParam(rawQuery(request), 'limit') ?? 100), {
      auth: 'operator',
      detail: doc({
        tags: TAG,
        summary: 'The webhook queue: deliveries pending or in flight, the soonest due first',
        parameters: queryParams({ limit: { description: 'deliveries listed, 1–1000 (default 100)', schema: { type: 'integer', minimum: 1, maximum: 1000 } } }),
        responses: { 200: jsonResponse(WebhookQueue, 'The queue') },
      }),
    })
    .get('/v1/admin/errors', ({ request }) => {
      const limit = intParam(rawQuery(request), 'limit') ?? 100
      if (limit < 1 || limit > 1000) throw badRequest('limit must be an integer from 1 to 1000', { limit: '1–1000' })
      return { errors: admin.recentErrors(limit) }
    }, {
      auth: 'operator',
      detail: doc({
        tags: TAG,
        summary: "The running relay's latest warnings and errors, newest first",
        description: 'Kept in memory (the last 200 lines); a restart starts empty.',
        parameters: queryParams({ limit: { description: 'lines listed, 1–1000 (default 100)', schema: { type: 'integer', minimum: 1, maximum: 1000 } } }),
        responses: { 200: jsonResponse(RecentErrors, 'Warnings and errors') },
      }),
    })
    .get('/v1/admin/traffic', () => ({ minutes: admin.traffic() }), {
      auth: 'operator',
      detail: doc({
        tags: TAG,
        summary: 'HTTP answers per minute over the last hour, with 4xx and 5xx counts',
        description: 'Kept in memory by the running relay; a restart starts empty.',
        responses: { 200: jsonResponse(TrafficSeries, 'One entry per minute, oldest first') },
      }),
    })
}
