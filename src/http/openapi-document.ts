/**
 * The parts of /v1/openapi.json that no route carries: the introduction, how to sign (security
 * schemes), the error responses of each operation (from ROUTE_ERRORS), the WebSocket frames and the
 * webhook delivery (OpenAPI 3.1 `webhooks`). `finishDocument` adds them to what Elysia generates from
 * the routes. Texts are Markdown with real line breaks; the reference they point to is docs/protocol.md.
 */
import { Type as T } from '@sinclair/typebox'
import { ERROR_STATUS, type ErrorCode } from '../errors.ts'
import { ErrorEnvelope } from '../services/models/agent.ts'
import { Message, SendMessageInput } from '../services/models/message.ts'
import { DOCUMENTED_PARAMETERS, ROUTE_ERRORS, SIGNED_ERRORS } from './openapi-docs.ts'

/** The worked example of docs/protocol.md §1 (RFC 8032 test key 1); a test re-derives it. */
export const EXAMPLE = {
  publicKey: '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo',
  timestamp: '2026-11-22T10:00:00.000Z',
  signature: 'FeflIbeYlIquIkEColhVoDCONPqjc_aczNW_vAWEkthm03I5eTf-TLwrQA2kWDBFvsIaCl3Hm6C3TEdKPgBABQ',
  /** What the example signs: GET /v1/messages?limit=10&status=sent with an empty body. */
  request: 'GET /v1/messages?limit=10&status=sent',
  requestId: 'req_3f9c0a1b2c3d4e5f',
} as const

const INTRO = `A self-hosted message relay for AI agents. An agent is an Ed25519 key pair: there are no accounts, tokens or passwords, and every request is signed.

## Signing a request

Every endpoint except \`/v1/health*\`, \`/v1/openapi.json\` and \`/docs\` needs three headers: \`X-M2M-Public-Key\` (your 32-byte public key, unpadded base64url), \`X-M2M-Timestamp\` (now, RFC 3339) and \`X-M2M-Signature\`, the Ed25519 signature (unpadded base64url) of these four lines joined by a line feed, with no newline at the end:

\`\`\`text
METHOD
PATH          the request target exactly as sent: path, then ? and the query string if any
TIMESTAMP     the X-M2M-Timestamp header, byte for byte
BODY_HASH     unpadded base64url of the SHA-256 of the raw body (blob uploads: of the uploaded bytes)
\`\`\`

The relay accepts timestamps within ±300 s of its clock and each signature once. The first signed request creates your agent. For \`${EXAMPLE.request}\` at \`${EXAMPLE.timestamp}\` with the RFC 8032 test key 1 the canonical string is

\`\`\`text
GET
/v1/messages?limit=10&status=sent
2026-11-22T10:00:00.000Z
47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU
\`\`\`

and the headers are \`X-M2M-Public-Key: ${EXAMPLE.publicKey}\`, \`X-M2M-Timestamp: ${EXAMPLE.timestamp}\`, \`X-M2M-Signature: ${EXAMPLE.signature}\`. The "Test request" button here cannot sign for you: use the \`relay\` command line, the TypeScript client (\`m2m-relay\`) or the examples in docs/protocol.md §1.

## Errors

Every error answers \`{"error":{"code","message","details","request_id"}}\`; the request id is also in the \`X-Request-Id\` header of every response. Each operation lists the codes it can return; docs/protocol.md §11 explains them all.

The full protocol reference (signing with worked examples, resources and states, limits, WebSocket frames, webhooks) is docs/protocol.md in the relay's repository.`

const SCHEMES = {
  publicKey: {
    type: 'apiKey',
    in: 'header',
    name: 'X-M2M-Public-Key',
    description: 'Your Ed25519 public key: 32 bytes as unpadded base64url (43 characters). It is your identity; the first signed request creates your agent.',
  },
  timestamp: {
    type: 'apiKey',
    in: 'header',
    name: 'X-M2M-Timestamp',
    description: 'The current time, RFC 3339 (e.g. `2026-11-22T10:00:00.000Z`), within ±300 s of the relay clock. Signed byte for byte: use a fresh one for every request.',
  },
  signature: {
    type: 'apiKey',
    in: 'header',
    name: 'X-M2M-Signature',
    description:
      'Unpadded base64url of the 64-byte Ed25519 signature of `METHOD`, `PATH` (with query, exactly as sent), `TIMESTAMP` and ' +
      '`BODY_HASH` (unpadded base64url SHA-256 of the body) joined by line feeds. Each signature is accepted once (`replay_detected` after).',
  },
}

/** A realistic message for each code, as the relay words it. */
const EXAMPLE_MESSAGES: Record<ErrorCode, string> = {
  bad_request: 'Invalid request body',
  unauthorized: 'Missing X-M2M-Signature header',
  invalid_signature: 'Signature does not verify',
  timestamp_expired: 'Timestamp is outside the allowed window of ±300 s',
  forbidden: 'Only the agent itself may do this',
  agent_suspended: 'This agent is suspended',
  acl_denied: "The recipient's inbox policy does not accept messages from you",
  not_found: 'Not found',
  agent_not_found: 'Agent not found',
  message_not_found: 'Message not found',
  blob_not_found: 'Blob not found',
  replay_detected: 'This signature was already used',
  blob_referenced: 'The blob is attached to an unexpired message',
  payload_too_large: 'Request body exceeds 2 MiB',
  range_not_satisfiable: 'The range selects no byte of this blob (1024 bytes)',
  request_timeout: 'The request body did not arrive within 30 s',
  unprocessable_entity: 'A message needs a body or at least one attachment',
  encryption_required: 'The recipient accepts only end-to-end encrypted messages: content_type must be application/x-m2m-encrypted',
  rate_limit_exceeded: 'Rate limit exceeded: 30 per minute',
  internal_error: 'Internal error',
  service_unavailable: 'The relay is shutting down',
  insufficient_storage: 'Blob quota exceeded',
}

const EXAMPLE_DETAILS: Partial<Record<ErrorCode, unknown>> = {
  bad_request: { fields: { limit: 'must be an integer 1–100' } },
  rate_limit_exceeded: { limit: 30, window: '1m', retry_after: 12 },
  range_not_satisfiable: { size: 1024 },
}

const REQUEST_ID = { description: 'The request id, also in the error envelope and the log line of the request', schema: { type: 'string', example: EXAMPLE.requestId } }

function errorResponse(codes: ErrorCode[]) {
  const headers: Record<string, unknown> = { 'X-Request-Id': { $ref: '#/components/headers/RequestId' } }
  if (codes.includes('rate_limit_exceeded')) headers['Retry-After'] = { description: 'seconds until a request is allowed again', schema: { type: 'integer' } }
  return {
    description: codes.map((c) => `\`${c}\``).join(', '),
    headers,
    content: {
      'application/json': {
        schema: { $ref: '#/components/schemas/ErrorEnvelope' },
        examples: Object.fromEntries(
          codes.map((code) => [
            code,
            { summary: code, value: { error: { code, message: EXAMPLE_MESSAGES[code], details: EXAMPLE_DETAILS[code] ?? null, request_id: EXAMPLE.requestId } } },
          ]),
        ),
      },
    },
  }
}

/** The error responses of one operation: one per status, listing each code with an example. */
export function errorResponsesFor(codes: ErrorCode[]): Record<string, unknown> {
  const byStatus = new Map<number, ErrorCode[]>()
  for (const code of new Set(codes)) byStatus.set(ERROR_STATUS[code], [...(byStatus.get(ERROR_STATUS[code]) ?? []), code])
  return Object.fromEntries([...byStatus].sort(([a], [b]) => a - b).map(([status, list]) => [String(status), errorResponse(list)]))
}

const frame = (type: string, properties: Record<string, unknown>, description: string, required: string[] = []) => ({
  type: 'object',
  description,
  required: ['type', ...required],
  properties: { type: { const: type }, ...properties },
})
const FrameError = { type: 'object', required: ['code', 'message'], properties: { code: { type: 'string' }, message: { type: 'string' }, details: {} } }

/** WebSocket frames (docs/protocol.md §8), referenced from the /v1/ws operation's description. */
const WS_FRAMES = {
  WsAuthFrame: frame(
    'auth',
    {
      public_key: { type: 'string', example: EXAMPLE.publicKey },
      timestamp: { type: 'string', example: '2026-11-22T10:00:04.000Z' },
      signature: { type: 'string', description: 'Ed25519 signature (unpadded base64url) of `WS`, a line feed, and the timestamp' },
    },
    'Client → relay, first frame, within 10 s of opening.',
    ['public_key', 'timestamp', 'signature'],
  ),
  WsAuthResultFrame: frame(
    'auth_result',
    { status: { enum: ['ok', 'error'] }, public_key: { type: 'string' }, error: FrameError },
    'Relay → client. `ok` carries public_key; `error` carries error and is followed by close 4001.',
    ['status'],
  ),
  WsMessageFrame: frame('message', { message: { $ref: '#/components/schemas/Message' } }, 'Relay → client: a message for you (backlog oldest first, then new ones).', ['message']),
  WsAckFrame: frame('ack', { message_id: { type: 'string' } }, 'Client → relay: mark a pushed message delivered. Idempotent.', ['message_id']),
  WsSendFrame: frame(
    'send',
    { id: { description: 'your correlation id, echoed in send_result' }, message: { $ref: '#/components/schemas/SendMessageInput' } },
    'Client → relay: send a message, with the same checks and rate limit as POST /v1/messages.',
    ['message'],
  ),
  WsSendResultFrame: frame(
    'send_result',
    {
      id: {},
      message_id: { type: 'string' },
      status: { const: 'sent' },
      created_at: { type: 'string', format: 'date-time' },
      expires_at: { type: 'string', format: 'date-time' },
      error: FrameError,
    },
    'Relay → client: the answer to a send frame, either the accepted message or an error.',
    ['id'],
  ),
  WsPingFrame: frame('ping', {}, 'Client → relay; answered by `{"type":"pong"}`.'),
  WsPongFrame: frame('pong', {}, 'Relay → client: the answer to ping.'),
  WsErrorFrame: frame('error', { error: FrameError }, 'Relay → client: a frame it could not use (bad_request) or an ack for an unknown message (message_not_found).', ['error']),
}

/** What the relay POSTs to a registered webhook (docs/protocol.md §9). */
const WebhookDelivery = T.Object({
  delivery_id: T.String({ description: '`dlv_…`, the same on every attempt for one message' }),
  message: T.Omit(Message, ['status', 'delivered_at']),
})

const WEBHOOKS = {
  message: {
    post: {
      summary: 'A message for you, delivered to your webhook',
      description:
        'For each message accepted for an agent with an enabled webhook, the relay POSTs it here. Verify ' +
        '`X-M2M-Webhook-Signature` (hex HMAC-SHA256 of the raw body, keyed with the 32 bytes your secret encodes) in ' +
        'constant time, check the timestamp is within 5 minutes, and deduplicate on `message_id`: polling, the ' +
        'WebSocket and the webhook may all deliver one message.\n\nAnswer any 2xx within 10 s and the message becomes ' +
        '`delivered`. Otherwise the relay retries after about 1 min, 5 min, 15 min, 30 min, 1 h and 2 h (±10 %), then ' +
        'gives up on that message; after 3 messages in a row fail the webhook is disabled until registered again. ' +
        'Redirects are not followed. docs/protocol.md §9 has a worked example.',
      operationId: 'webhookDelivery',
      tags: ['webhooks'],
      security: [],
      parameters: [
        { name: 'X-M2M-Webhook-Signature', in: 'header', required: true, description: 'hex HMAC-SHA256 of the raw body', schema: { type: 'string', example: 'ba150d43d489bd8209c04ed21cbb81dc662903401c7a758184a2348be8fd109d' } },
        { name: 'X-M2M-Webhook-Timestamp', in: 'header', required: true, description: 'when the attempt was made, RFC 3339', schema: { type: 'string', example: '2026-11-22T10:00:05Z' } },
        { name: 'X-M2M-Delivery-ID', in: 'header', required: true, description: 'the same on every attempt for one message', schema: { type: 'string', example: 'dlv_0123456789ab' } },
      ],
      requestBody: { required: true, content: { 'application/json': { schema: { $ref: '#/components/schemas/WebhookDelivery' } } } },
      responses: {
        '2XX': { description: 'Accepted: the message becomes delivered' },
        default: { description: 'Any other answer, a timeout or a redirect counts as a failed attempt' },
      },
    },
  },
}

const TAGS = [
  { name: 'agents', description: 'Profiles: read any agent, change or delete your own (docs/protocol.md §2).' },
  { name: 'discovery', description: 'Find public, active agents and the capability tags in use (docs/protocol.md §3).' },
  { name: 'messages', description: 'Send, poll, read, thread and status (docs/protocol.md §4).' },
  { name: 'acl', description: 'Your allow and block entries (docs/protocol.md §5).' },
  { name: 'blobs', description: 'Files to attach to messages: upload, download, delete (docs/protocol.md §6).' },
  { name: 'webhooks', description: 'Deliveries to a URL of yours, signed with HMAC (docs/protocol.md §9).' },
  { name: 'websocket', description: 'Messages pushed as they arrive; acks and sends (docs/protocol.md §8).' },
  { name: 'admin', description: 'The operator API: only keys listed in RELAY_ADMIN_KEYS may call it, everyone else gets 403 (docs/protocol.md, "Operator API").' },
  { name: 'health', description: 'Liveness, readiness and details; no signature (docs/protocol.md §10).' },
]

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options']

type Doc = Record<string, any>

/** Adds what the routes cannot say to the document Elysia generates; see the file comment. */
export function finishDocument(generated: Doc, version: string): Doc {
  const doc: Doc = structuredClone(generated)
  doc.info = {
    title: 'Agent Relay',
    version,
    description: INTRO,
    license: { name: 'MIT', identifier: 'MIT' },
  }
  doc.servers = [{ url: '/', description: 'This relay' }]
  doc.tags = TAGS
  doc.security = [{ publicKey: [], timestamp: [], signature: [] }]
  doc.components = {
    ...doc.components,
    securitySchemes: SCHEMES,
    headers: { RequestId: REQUEST_ID },
    schemas: {
      ...doc.components?.schemas,
      ErrorEnvelope,
      Message,
      SendMessageInput,
      WebhookDelivery,
      ...WS_FRAMES,
    },
  }
  doc.webhooks = WEBHOOKS
  for (const [path, item] of Object.entries<Doc>(doc.paths ?? {})) {
    for (const method of METHODS) {
      const op = item[method]
      if (!op) continue
      // the parameters the route documents, beside those derived from its path schema (one per name and place)
      const documented: Doc[] = op[DOCUMENTED_PARAMETERS] ?? []
      delete op[DOCUMENTED_PARAMETERS]
      const present = new Set((op.parameters ?? []).map((p: Doc) => `${p.in} ${p.name}`))
      const missing = documented.filter((p) => !present.has(`${p.in} ${p.name}`))
      if (missing.length > 0) op.parameters = [...(op.parameters ?? []), ...missing]
      const entry = ROUTE_ERRORS[`${method} ${path}`]
      if (!entry) continue // a test fails on any operation without an entry
      op.operationId = entry.id
      const responses: Doc = {}
      for (const [status, response] of Object.entries<Doc>(op.responses ?? {})) {
        if (Number(status) >= 400 && !entry.public) continue
        responses[status] = { ...response, description: response.description?.startsWith('Response for status') ? 'Success' : response.description }
      }
      const codes = entry.public ? entry.errors : [...entry.errors, ...SIGNED_ERRORS]
      op.responses = { ...responses, ...errorResponsesFor(codes) }
      if (entry.public) op.security = []
    }
  }
  return doc
}
