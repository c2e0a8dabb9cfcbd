/** /v1/agents/{publicKey}/acl (docs/protocol.md §5): owner only; the ACL service validates keys and bodies. */
import { Elysia } from 'elysia'
import { routeAuth } from '../route-auth.ts'
import { aclEntryToJson, type AclService } from '../../services/acl.ts'
import { AclEntry, AclList, AclPutEntryInput, AclPutInput } from '../../services/models/acl.ts'
import type { AclRecord } from '../../services/models/records.ts'
import { KeyOrMe, PublicKey } from '../../services/models/agent.ts'
import { doc, jsonBody, jsonResponse, pathParam, queryParams } from '../openapi-docs.ts'
import { rawQuery } from '../query.ts'

const keys = [pathParam('publicKey', KeyOrMe), pathParam('peerKey', PublicKey)]

/** A PUT's answer: 201 when the entry was created, 200 when it existed (docs/protocol.md §5). */
function putAnswer(set: { status?: number | string }, { row, created }: { row: AclRecord; created: boolean }) {
  set.status = created ? 201 : 200
  return aclEntryToJson(row)
}

export function aclRoutes(acl: AclService) {
  return new Elysia({ name: 'routes-acl' })
    .use(routeAuth)
    .get(
      '/v1/agents/:publicKey/acl',
      async ({ caller, request, params }) => (await acl.list(caller.publicKey, params.publicKey, rawQuery(request))).map(aclEntryToJson),
      {
        auth: 'agent',
        detail: doc({
          tags: ['acl'],
          summary: 'Your ACL entries, newest first',
          parameters: [
            keys[0],
            ...queryParams({
              entry_type: { description: 'allow or block', schema: { type: 'string', enum: ['allow', 'block'] } },
              type: { description: 'the same as entry_type', schema: { type: 'string', enum: ['allow', 'block'] } },
            }),
          ],
          responses: { 200: jsonResponse(AclList, 'Entries') },
        }),
      },
    )
    .put(
      '/v1/agents/:publicKey/acl',
      async ({ caller, params, body, set }) => putAnswer(set, await acl.putEntry(caller.publicKey, params.publicKey, body)),
      {
        auth: 'agent',
        detail: doc({
          tags: ['acl'],
          summary: 'Allow or block a peer named in the body (201 when created, 200 when it existed)',
          parameters: [keys[0]],
          requestBody: jsonBody(AclPutEntryInput),
          responses: { 200: jsonResponse(AclEntry, 'Changed'), 201: jsonResponse(AclEntry, 'Created') },
        }),
      },
    )
    .get(
      '/v1/agents/:publicKey/acl/:peerKey',
      async ({ caller, request, params }) => aclEntryToJson(await acl.get(caller.publicKey, params.publicKey, params.peerKey)),
      {
        auth: 'agent',
        detail: doc({
          tags: ['acl'],
          summary: 'Your ACL entry for one peer',
          parameters: keys,
          responses: { 200: jsonResponse(AclEntry, 'Entry') },
        }),
      },
    )
    .put(
      '/v1/agents/:publicKey/acl/:peerKey',
      async ({ caller, params, body, set }) => putAnswer(set, await acl.put(caller.publicKey, params.publicKey, params.peerKey, body)),
      {
        auth: 'agent',
        detail: doc({
          tags: ['acl'],
          summary: 'Allow or block a peer (201 when created, 200 when it existed)',
          parameters: keys,
          requestBody: jsonBody(AclPutInput),
          responses: { 200: jsonResponse(AclEntry, 'Changed'), 201: jsonResponse(AclEntry, 'Created') },
        }),
      },
    )
    .delete(
      '/v1/agents/:publicKey/acl/:peerKey',
      async ({ caller, request, params, set }) => {
        await acl.delete(caller.publicKey, params.publicKey, params.peerKey)
        set.status = 204
        return null
      },
      {
        auth: 'agent',
        detail: doc({
          tags: ['acl'],
          summary: 'Remove your ACL entry for a peer',
          parameters: keys,
          responses: { 204: { description: 'Removed' } },
        }),
      },
    )
}
