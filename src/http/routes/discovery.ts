/**
 * /v1/discover and /v1/capabilities. The discovery service checks every parameter itself, so
 * the schemas here are documentation only.
 */
import { Elysia } from 'elysia'
import { routeAuth } from '../route-auth.ts'
import type { DiscoveryService } from '../../services/discovery.ts'
import { CapabilitiesQuery, CapabilityCatalog, DiscoverQuery, DiscoverResult } from '../../services/models/discovery.ts'
import { doc, jsonResponse } from '../openapi-docs.ts'
import { rawQuery } from '../query.ts'

/** OpenAPI query parameters from an object schema's properties. */
const parametersOf = (schema: { properties: Record<string, unknown> }) =>
  Object.entries(schema.properties).map(([name, s]) => ({ name, in: 'query', required: false, schema: s }))

export function discoveryRoutes(discovery: DiscoveryService) {
  return new Elysia({ name: 'routes-discovery' })
    .use(routeAuth)
    .get('/v1/discover', ({ request }) => discovery.discover(rawQuery(request)), {
      auth: 'agent',
      detail: doc({
        tags: ['discovery'],
        summary: 'Find public, active agents by tag, text, name or recent activity',
        description:
          'At least one of tag, q, name, active_since is required. Results are ordered by last_active_at descending, ' +
          'then public_key; page with next_cursor. An agent whose activity changes between pages moves in this order.',
        parameters: parametersOf(DiscoverQuery),
        responses: { 200: jsonResponse(DiscoverResult, 'One page') },
      }),
    })
    .get('/v1/capabilities', ({ request }) => discovery.catalog(rawQuery(request)), {
      auth: 'agent',
      detail: doc({
        tags: ['discovery'],
        summary: 'Tags used by public, active agents, with how many agents use each',
        description: 'Ordered by agent_count descending, then tag.',
        parameters: parametersOf(CapabilitiesQuery),
        responses: { 200: jsonResponse(CapabilityCatalog, 'Tags and counts') },
      }),
    })
}
