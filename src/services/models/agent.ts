/** Wire shapes of agents and capabilities (SPEC §2.1); used for validation and the OpenAPI document. */
import { Type as T } from '@sinclair/typebox'

export const PublicKey = T.String({ pattern: '^[A-Za-z0-9_-]{43}$', description: 'Ed25519 public key, unpadded base64url' })
const DateTime = T.String({ format: 'date-time' })

export const Capability = T.Object(
  {
    name: T.String({ minLength: 1, maxLength: 128 }),
    description: T.Optional(T.String({ maxLength: 2000 })),
    tags: T.Optional(T.Array(T.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_:.-]+$' }), { maxItems: 20 })),
    input_schema: T.Optional(T.Record(T.String(), T.Unknown(), { description: 'JSON Schema object, ≤ 16 KiB serialized' })),
    version: T.Optional(T.String({ maxLength: 64 })),
  },
  { additionalProperties: false },
)

export const AgentPatch = T.Object(
  {
    display_name: T.Optional(T.Union([T.String({ maxLength: 256 }), T.Null()])),
    visibility: T.Optional(T.Union([T.Literal('public'), T.Literal('private')])),
    inbox_policy: T.Optional(T.Union([T.Literal('open'), T.Literal('closed'), T.Literal('allowlist'), T.Literal('blocklist')])),
    metadata: T.Optional(T.Record(T.String(), T.Unknown(), { description: 'object, ≤ 16 KiB serialized' })),
    capabilities: T.Optional(T.Array(Capability, { maxItems: 20 })),
  },
  { additionalProperties: false },
)

export const Agent = T.Object({
  public_key: PublicKey,
  display_name: T.Optional(T.String()),
  status: T.Union([T.Literal('active'), T.Literal('suspended')]),
  visibility: T.Union([T.Literal('public'), T.Literal('private')]),
  inbox_policy: T.Union([T.Literal('open'), T.Literal('closed'), T.Literal('allowlist'), T.Literal('blocklist')]),
  created_at: DateTime,
  last_active_at: DateTime,
  metadata: T.Record(T.String(), T.Unknown()),
  capabilities: T.Array(Capability),
})

export const CapabilityList = T.Object({ capabilities: T.Array(Capability) })

export const ErrorEnvelope = T.Object({
  error: T.Object({
    code: T.String(),
    message: T.String(),
    details: T.Unknown(),
    request_id: T.String(),
  }),
})
