/** Health endpoints (docs/protocol.md §10); no authentication. */
import { Elysia } from 'elysia'
import { routeAuth } from '../route-auth.ts'
import type { HealthService } from '../../services/health.ts'
import { doc, jsonResponse } from '../openapi-docs.ts'

const Ok = { type: 'object', required: ['status'], properties: { status: { const: 'ok' } } }
const Unavailable = {
  type: 'object',
  required: ['status', 'problems'],
  properties: { status: { const: 'unavailable' }, problems: { type: 'object', additionalProperties: { type: 'string' }, description: 'check name → problem' } },
}
const Component = {
  type: 'object',
  required: ['status'],
  properties: { status: { enum: ['ok', 'degraded', 'down'] } },
  additionalProperties: true,
  description: "the component's state and its figures",
}
const Details = {
  type: 'object',
  required: ['status', 'version', 'timestamp', 'uptime_s', 'components'],
  properties: {
    status: { enum: ['ok', 'degraded', 'down'] },
    version: { type: 'string' },
    timestamp: { type: 'string', format: 'date-time' },
    uptime_s: { type: 'integer' },
    components: { type: 'object', additionalProperties: Component, description: 'database, blob_store, websocket, webhooks, jobs' },
  },
}

export function healthRoutes(health: HealthService) {
  return new Elysia({ name: 'routes-health' })
    .use(routeAuth)
    .get('/v1/health', () => ({ status: 'ok' }), {
      auth: 'public',
      detail: doc({
        tags: ['health'],
        summary: 'Liveness',
        description: 'Answers while the process serves. No signature needed.',
        security: [],
        responses: { 200: jsonResponse(Ok, 'The relay is up') },
      }),
    })
    // for probes that tell liveness from readiness (MRP's path); touches no database
    .get('/v1/health/live', () => ({ status: 'ok' }), {
      auth: 'public',
      detail: doc({
        tags: ['health'],
        summary: 'Liveness (no database access)',
        description: 'Answers while the process serves, without touching storage. No signature needed.',
        security: [],
        responses: { 200: jsonResponse(Ok, 'The relay is up') },
      }),
    })
    .get(
      '/v1/health/ready',
      async ({ set }) => {
        const { ok, problems } = await health.ready()
        if (ok) return { status: 'ok' }
        set.status = 503
        return { status: 'unavailable', problems }
      },
      {
        auth: 'public',
        detail: doc({
          tags: ['health'],
          summary: 'Readiness: database and blob directory writable',
          description: 'For load balancers and start-up checks (`relay health` calls it). No signature needed.',
          security: [],
          responses: { 200: jsonResponse(Ok, 'Ready to serve'), 503: jsonResponse(Unavailable, 'Not ready; problems names each failed check') },
        }),
      },
    )
    .get('/v1/health/details', () => health.details(), {
      auth: 'public',
      detail: doc({
        tags: ['health'],
        summary: 'Version, uptime and the state of each component',
        description: 'No signature needed.',
        security: [],
        responses: { 200: jsonResponse(Details, 'Version, uptime and components') },
      }),
    })
}
