/** Wire shapes of agents and capabilities (docs/protocol.md §2.1); used for validation and the OpenAPI document. */
import { Type as T } from '@sinclair/typebox'
import { PUBLIC_KEY_PATTERN_TEXT } from '../../auth/keys.ts'
import { PROBLEM, Text } from './text.ts'

export const PublicKey = T.String({
  pattern: PUBLIC_KEY_PATTERN_TEXT,
  description: 'Ed25519 public key, unpadded base64url (43 characters, the canonical spelling: unused trailing bits zero)',
  [PROBLEM]: 'must be a public key: 43 base64url characters in the canonical spelling (unused trailing bits zero)',
})
const DateTime = T.String({ format: 'date-time' })

/** A `{publicKey}` path segment: a key, or `me` for the caller's own (documentation only). */
export const KeyOrMe = T.Union([PublicKey, T.Literal('me')], { description: 'an agent public key, or `me` for your own' })

/** A capability tag (stored lower-cased). */
export const TAG_PATTERN_TEXT = '^[A-Za-z0-9_:.-]{1,64}$'
export const Tag = Text({ minChars: 1, maxChars: 64, pattern: TAG_PATTERN_TEXT, problem: 'must be 1–64 of A-Z a-z 0-9 _ : . -' })

export const Capability = T.Object(
  {
    name: Text({ minChars: 1, maxChars: 128 }),
    description: T.Optional(Text({ maxChars: 2000 })),
    tags: T.Optional(T.Array(Tag, { maxItems: 20 })),
    input_schema: T.Optional(T.Record(T.String(), T.Unknown(), { description: 'JSON Schema object, ≤ 16 KiB serialized' })),
    version: T.Optional(Text({ maxChars: 64 })),
  },
  { additionalProperties: false },
)

export const AgentPatch = T.Object(
  {
    display_name: T.Optional(T.Union([Text({ maxChars: 256 }), T.Null()], { description: 'null removes the display name' })),
    visibility: T.Optional(T.Union([T.Literal('public'), T.Literal('private')])),
    inbox_policy: T.Optional(T.Union([T.Literal('open'), T.Literal('closed'), T.Literal('allowlist'), T.Literal('blocklist')])),
    metadata: T.Optional(T.Record(T.String(), T.Unknown(), { description: 'object, ≤ 16 KiB serialized' })),
    capabilities: T.Optional(T.Array(Capability, { maxItems: 20 })),
  },
  { additionalProperties: false },
)

/**
 * The PATCH body as clients may send it (the OpenAPI document): besides AgentPatch, `null` for
 * visibility, inbox_policy, metadata or capabilities means "leave unchanged", and a capability may be
 * a plain string (its name, and its tag when the name is a valid tag).
 */
export const AgentPatchInput = T.Object(
  {
    ...AgentPatch.properties,
    visibility: T.Optional(T.Union([T.Literal('public'), T.Literal('private'), T.Null()])),
    inbox_policy: T.Optional(T.Union([T.Literal('open'), T.Literal('closed'), T.Literal('allowlist'), T.Literal('blocklist'), T.Null()])),
    metadata: T.Optional(T.Union([T.Record(T.String(), T.Unknown()), T.Null()], { description: 'object, ≤ 16 KiB serialized; null leaves it unchanged' })),
    capabilities: T.Optional(
      T.Union([T.Array(T.Union([Capability, Text({ minChars: 1, maxChars: 128 })]), { maxItems: 20 }), T.Null()], {
        description: 'replaces all capabilities; a string is a capability with that name (and that tag when it is a valid tag); null leaves them unchanged',
      }),
    ),
  },
  { additionalProperties: false },
)

/** The body of POST /v1/agents/{publicKey}/capabilities (documentation): `{capabilities}` or the bare array. */
export const CapabilitiesInput = T.Union([
  T.Object({ capabilities: T.Array(T.Union([Capability, Text({ minChars: 1, maxChars: 128 })]), { maxItems: 20 }) }),
  T.Array(T.Union([Capability, Text({ minChars: 1, maxChars: 128 })]), { maxItems: 20 }),
])

export const Agent = T.Object({
  public_key: PublicKey,
  display_name: T.Union([T.String(), T.Null()], { description: 'null when unset' }),
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
