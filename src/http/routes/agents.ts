/**
 * /v1/agents/{publicKey} and its capabilities. The agents service validates bodies itself
 * (the framework's validator would answer some bad values with a 500), so the schemas here are
 * documentation only. `me` stands for the caller's own key on every /v1/agents/{publicKey} path.
 */
import { Elysia } from 'elysia'
import { routeAuth } from '../route-auth.ts'
import { parseExact } from '../../lib/json-text.ts'
import { agentToJson, type AgentsService } from '../../services/agents.ts'
import { Agent, AgentPatchInput, CapabilityList, KeyOrMe } from '../../services/models/agent.ts'
import { doc, jsonBody, jsonResponse, pathParam } from '../openapi-docs.ts'

const key = [pathParam('publicKey', KeyOrMe)]

export function agentRoutes(agents: AgentsService) {
  return new Elysia({ name: 'routes-agents' })
    .use(routeAuth)
    .get('/v1/agents/:publicKey', async ({ params }) => agentToJson(await agents.get(params.publicKey)), {
      auth: 'agent',
      detail: doc({
        tags: ['agents'],
        summary: 'Read an agent profile',
        parameters: key,
        responses: { 200: jsonResponse(Agent, 'The profile') },
      }),
    })
    .patch(
      '/v1/agents/:publicKey',
      async ({ caller, params, body, request }) => agentToJson(await agents.patch(caller.publicKey, params.publicKey, body)),
      {
        auth: 'agent',
        detail: doc({
          tags: ['agents'],
          summary: 'Update your own profile (fields present replace whole fields)',
          parameters: key,
          requestBody: { ...jsonBody(AgentPatchInput), required: false },
          responses: { 200: jsonResponse(Agent, 'The updated profile') },
        }),
      },
    )
    .delete(
      '/v1/agents/:publicKey',
      async ({ caller, params, request, set }) => {
        await agents.delete(caller.publicKey, params.publicKey)
        set.status = 204
        return null
      },
      {
        auth: 'agent',
        detail: doc({
          tags: ['agents'],
          summary: 'Delete your own agent and its data',
          description:
            'Removes your profile, ACL entries, webhook, the messages addressed to you and your unreferenced blobs, and closes your WebSockets. The key may come back later as a fresh agent.',
          parameters: key,
          responses: { 204: { description: 'Deleted' } },
        }),
      },
    )
    .get('/v1/agents/:publicKey/capabilities', async ({ params }) => ({ capabilities: parseExact((await agents.get(params.publicKey)).capabilities) }), {
      auth: 'agent',
      detail: doc({
        tags: ['agents'],
        summary: 'Full capability definitions of an agent',
        parameters: key,
        responses: { 200: jsonResponse(CapabilityList, 'Capabilities') },
      }),
    })
}
