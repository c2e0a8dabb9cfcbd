/**
 * Helpers for OpenAPI `detail` objects of routes whose inputs a service validates (so Elysia gets no
 * schema to validate with, only documentation). The OpenAPI typings are stricter than TypeBox's JSON
 * Schema output, hence the one cast in `doc`.
 *
 * Error responses are not written route by route: `ROUTE_ERRORS` below says which codes each
 * operation can return, and the document finisher (`openapi-document.ts`) renders them, one response per
 * status with an example per code, all in the error envelope (docs/protocol.md §11).
 */
import type { ErrorCode } from '../errors.ts'

type Schema = unknown

/**
 * A route's OpenAPI operation object. Its parameters are also kept under `x-documented-parameters`:
 * the generator replaces `parameters` with the ones it derives from a route's path schema, which
 * would drop the query parameters of a route with a path parameter; the document finisher merges them
 * back.
 */
export const doc = (detail: Record<string, unknown>): never =>
  (detail.parameters ? { ...detail, [DOCUMENTED_PARAMETERS]: detail.parameters } : detail) as never

export const DOCUMENTED_PARAMETERS = 'x-documented-parameters'

export const jsonResponse = (schema: Schema, description: string, headers?: Record<string, unknown>) => ({
  description,
  content: { 'application/json': { schema } },
  ...(headers ? { headers } : {}),
})

export const jsonBody = (schema: Schema) => ({ required: true, content: { 'application/json': { schema } } })

export const pathParam = (name: string, schema: Schema = { type: 'string' }) => ({ name, in: 'path', required: true, schema })

export const queryParams = (params: Record<string, { description: string; schema: Schema }>) =>
  Object.entries(params).map(([name, p]) => ({ name, in: 'query', required: false, ...p }))

/** Headers of rate-limited endpoints (docs/protocol.md §7). */
export const rateLimitHeaders = {
  'X-RateLimit-Limit': { schema: { type: 'integer' }, description: 'requests allowed per sliding minute' },
  'X-RateLimit-Remaining': { schema: { type: 'integer' }, description: 'requests left in the window' },
  'X-RateLimit-Reset': { schema: { type: 'integer' }, description: 'unix seconds when the window next frees a request' },
}

/** What every signed request can fail with, whatever the route (docs/protocol.md §1.2, §11). */
export const SIGNED_ERRORS: ErrorCode[] = ['unauthorized', 'invalid_signature', 'timestamp_expired', 'agent_suspended', 'replay_detected', 'internal_error', 'service_unavailable']

/** JSON bodies are read whole before parsing, up to 2 MiB (docs/protocol.md §4.3, §12). */
const JSON_BODY: ErrorCode[] = ['bad_request', 'payload_too_large']

/**
 * Per operation (`METHOD path` as in the document): its operationId and the error codes its own
 * checks can return, on top of SIGNED_ERRORS for signed routes. A test checks that every operation of
 * the document has an entry, so a new route cannot go out undocumented.
 */
export const ROUTE_ERRORS: Record<string, { id: string; errors: ErrorCode[]; public?: boolean }> = {
  'get /v1/health': { id: 'health', errors: [], public: true },
  'get /v1/health/live': { id: 'healthLive', errors: [], public: true },
  'get /v1/health/ready': { id: 'healthReady', errors: [], public: true },
  'get /v1/health/details': { id: 'healthDetails', errors: [], public: true },
  'get /v1/agents/{publicKey}': { id: 'getAgent', errors: ['bad_request', 'agent_not_found'] },
  'patch /v1/agents/{publicKey}': { id: 'updateAgent', errors: [...JSON_BODY, 'forbidden'] },
  'delete /v1/agents/{publicKey}': { id: 'deleteAgent', errors: ['bad_request', 'forbidden'] },
  'get /v1/agents/{publicKey}/capabilities': { id: 'getAgentCapabilities', errors: ['bad_request', 'agent_not_found'] },
  'post /v1/agents/{publicKey}/capabilities': { id: 'setAgentCapabilities', errors: [...JSON_BODY, 'forbidden'] },
  'get /v1/discover': { id: 'discover', errors: ['bad_request'] },
  'get /v1/capabilities': { id: 'listCapabilityTags', errors: ['bad_request'] },
  'post /v1/messages': {
    id: 'sendMessage',
    errors: [...JSON_BODY, 'unprocessable_entity', 'rate_limit_exceeded', 'forbidden', 'acl_denied'],
  },
  'get /v1/messages': { id: 'pollMessages', errors: ['bad_request', 'rate_limit_exceeded'] },
  'get /v1/messages/threads/{threadID}': { id: 'getThread', errors: ['bad_request'] },
  'get /v1/messages/{messageID}': { id: 'getMessage', errors: ['bad_request', 'message_not_found'] },
  'get /v1/messages/{messageID}/status': { id: 'getMessageStatus', errors: ['bad_request', 'message_not_found'] },
  'get /v1/agents/{publicKey}/acl': { id: 'listAcl', errors: ['bad_request', 'forbidden'] },
  'get /v1/agents/{publicKey}/acl/{peerKey}': { id: 'getAclEntry', errors: ['bad_request', 'forbidden', 'not_found'] },
  'put /v1/agents/{publicKey}/acl/{peerKey}': { id: 'putAclEntry', errors: [...JSON_BODY, 'forbidden', 'unprocessable_entity'] },
  'put /v1/agents/{publicKey}/acl': { id: 'putAclEntryByBody', errors: [...JSON_BODY, 'forbidden', 'unprocessable_entity'] },
  'delete /v1/agents/{publicKey}/acl/{peerKey}': { id: 'deleteAclEntry', errors: ['bad_request', 'forbidden', 'not_found'] },
  'post /v1/blobs': { id: 'uploadBlob', errors: ['bad_request', 'payload_too_large', 'insufficient_storage'] },
  'get /v1/blobs/{blobID}': { id: 'downloadBlob', errors: ['bad_request', 'blob_not_found', 'range_not_satisfiable'] },
  'delete /v1/blobs/{blobID}': { id: 'deleteBlob', errors: ['bad_request', 'forbidden', 'blob_not_found', 'blob_referenced'] },
  'put /v1/agents/{publicKey}/webhook': { id: 'putWebhook', errors: [...JSON_BODY, 'forbidden', 'unprocessable_entity'] },
  'get /v1/agents/{publicKey}/webhook': { id: 'getWebhook', errors: ['bad_request', 'forbidden', 'not_found'] },
  'delete /v1/agents/{publicKey}/webhook': { id: 'deleteWebhook', errors: ['bad_request', 'forbidden', 'not_found'] },
  'get /v1/ws': { id: 'websocket', errors: ['bad_request'] },
  'get /v1/admin/stats': { id: 'adminStats', errors: ['forbidden'] },
  'get /v1/admin/agents': { id: 'adminListAgents', errors: ['bad_request', 'forbidden'] },
  'post /v1/admin/agents/{publicKey}/suspend': { id: 'adminSuspendAgent', errors: [...JSON_BODY, 'forbidden', 'agent_not_found'] },
  'post /v1/admin/agents/{publicKey}/unsuspend': { id: 'adminUnsuspendAgent', errors: [...JSON_BODY, 'forbidden', 'agent_not_found'] },
  'get /v1/admin/admission': { id: 'adminListAllowed', errors: ['forbidden'] },
  'post /v1/admin/admission': { id: 'adminAllowKey', errors: [...JSON_BODY, 'forbidden'] },
  'delete /v1/admin/admission/{publicKey}': { id: 'adminRevokeKey', errors: ['bad_request', 'forbidden', 'not_found'] },
  'get /v1/admin/webhooks': { id: 'adminWebhookQueue', errors: ['bad_request', 'forbidden'] },
  'get /v1/admin/errors': { id: 'adminRecentErrors', errors: ['bad_request', 'forbidden'] },
  'get /v1/admin/traffic': { id: 'adminTraffic', errors: ['forbidden'] },
}
