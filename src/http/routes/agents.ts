/** /v1/agents/{publicKey} and its capabilities (SPEC §2.2). */
import { Elysia } from 'elysia'
import { Type as T } from '@sinclair/typebox'
import { agentToJson, type AgentsService } from '../../services/agents.ts'
import { Agent, AgentPatch, CapabilityList, ErrorEnvelope, PublicKey } from '../../services/models/agent.ts'
import { callerOf } from '../app.ts'

const params = T.Object({ publicKey: PublicKey })
const errors = { 400: ErrorEnvelope, 401: ErrorEnvelope, 403: ErrorEnvelope, 404: ErrorEnvelope, 409: ErrorEnvelope }

export function agentRoutes(agents: AgentsService) {
  return new Elysia({ name: 'routes-agents' })
    .get('/v1/agents/:publicKey', ({ params }) => agentToJson(agents.get(params.publicKey)), {
      params,
      response: { 200: Agent, ...errors },
      detail: { tags: ['agents'], summary: 'Read an agent profile' },
    })
    .patch(
      '/v1/agents/:publicKey',
      ({ params, body, request }) => agentToJson(agents.patch(callerOf(request).publicKey, params.publicKey, body)),
      {
        params,
        body: T.Optional(AgentPatch),
        response: { 200: Agent, ...errors },
        detail: { tags: ['agents'], summary: 'Update your own profile (fields present replace whole fields)' },
      },
    )
    .delete(
      '/v1/agents/:publicKey',
      ({ params, request, set }) => {
        agents.delete(callerOf(request).publicKey, params.publicKey)
        set.status = 204
        return null
      },
      { params, detail: { tags: ['agents'], summary: 'Delete your own agent and its data' } },
    )
    .get(
      '/v1/agents/:publicKey/capabilities',
      ({ params }) => ({ capabilities: JSON.parse(agents.get(params.publicKey).capabilities) }),
      {
        params,
        response: { 200: CapabilityList, ...errors },
        detail: { tags: ['agents'], summary: 'Full capability definitions of an agent' },
      },
    )
}
