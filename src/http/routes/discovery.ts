/** /v1/discover and /v1/capabilities (SPEC §3). */
import { Elysia } from 'elysia'
import type { DiscoveryService, RawQuery } from '../../services/discovery.ts'
import { ErrorEnvelope } from '../../services/models/agent.ts'
import { CapabilitiesQuery, CapabilityCatalog, DiscoverQuery, DiscoverResult } from '../../services/models/discovery.ts'

const errors = { 400: ErrorEnvelope, 401: ErrorEnvelope, 403: ErrorEnvelope, 409: ErrorEnvelope }

export function discoveryRoutes(discovery: DiscoveryService) {
  return new Elysia({ name: 'routes-discovery' })
    .get('/v1/discover', ({ query }) => discovery.discover(query as RawQuery), {
      query: DiscoverQuery,
      response: { 200: DiscoverResult, ...errors },
      detail: {
        tags: ['discovery'],
        summary: 'Find public, active agents by tag, text, name or recent activity',
        description:
          'At least one of tag, q, name, active_since is required. Results are ordered by last_active_at descending, ' +
          'then public_key; page with next_cursor. An agent whose activity changes between pages moves in this order.',
      },
    })
    .get('/v1/capabilities', ({ query }) => discovery.catalog(query as RawQuery), {
      query: CapabilitiesQuery,
      response: { 200: CapabilityCatalog, ...errors },
      detail: {
        tags: ['discovery'],
        summary: 'Tags used by public, active agents, with how many agents use each',
        description: 'Ordered by agent_count descending, then tag.',
      },
    })
}
