/** Wire shapes of the operator API (docs/protocol.md, "Operator API"); documentation for the OpenAPI document. */
import { Type as T } from '@sinclair/typebox'

const DateTime = T.String({ format: 'date-time' })
const Key = T.String({ description: 'public key, 43 base64url characters' })

export const AdminStats = T.Object({
  agents: T.Object({ active: T.Integer(), suspended: T.Integer(), total: T.Integer() }),
  messages: T.Object({ sent: T.Integer(), delivered: T.Integer(), expired: T.Integer(), total: T.Integer() }, { description: 'by effective status now' }),
  blobs: T.Object({ records: T.Integer(), bytes: T.Integer(), stored_files: T.Integer(), stored_bytes: T.Integer() }),
  webhooks: T.Object({ enabled: T.Integer(), disabled: T.Integer(), pending_deliveries: T.Integer() }),
  database: T.Object({ size_bytes: T.Integer(), wal_bytes: T.Integer() }),
})

export const AdminAgent = T.Object({
  public_key: Key,
  display_name: T.Optional(T.String()),
  status: T.Union([T.Literal('active'), T.Literal('suspended')]),
  suspended_reason: T.Optional(T.String()),
  visibility: T.String(),
  inbox_policy: T.String(),
  capabilities: T.Integer({ description: 'how many capabilities the agent declares' }),
  created_at: DateTime,
  last_active_at: DateTime,
})

export const AdminAgentPage = T.Object({
  agents: T.Array(AdminAgent),
  has_more: T.Boolean(),
  next_cursor: T.Union([T.String(), T.Null()]),
})

export const AdminSuspendInput = T.Object(
  { reason: T.Optional(T.String({ maxLength: 500, description: 'why, for the operator; shown in listings' })) },
  { additionalProperties: false },
)

export const AllowedKey = T.Object({ public_key: Key, note: T.Union([T.String(), T.Null()]), created_at: DateTime })
export const AllowedKeyList = T.Object({ allowed: T.Array(AllowedKey) })
export const AllowInput = T.Object(
  { public_key: Key, note: T.Optional(T.String({ maxLength: 500, description: 'a note for the operator' })) },
  { additionalProperties: false },
)
export const AllowResult = T.Object({ added: T.Boolean({ description: 'false when the key was listed already' }), entry: AllowedKey })

export const WebhookQueue = T.Object({
  pending_deliveries: T.Integer({ description: 'deliveries waiting in all' }),
  deliveries: T.Array(
    T.Object({
      delivery_id: T.String(),
      public_key: Key,
      message_id: T.String(),
      state: T.Union([T.Literal('pending'), T.Literal('in_flight')]),
      attempts: T.Integer(),
      next_attempt_at: DateTime,
      last_error: T.Union([T.String(), T.Null()]),
      created_at: DateTime,
    }),
  ),
})

export const RecentErrors = T.Object({
  errors: T.Array(
    T.Object({
      time: DateTime,
      level: T.Union([T.Literal('warn'), T.Literal('error')]),
      msg: T.String(),
      fields: T.Record(T.String(), T.Unknown()),
    }),
  ),
})

export const TrafficSeries = T.Object({
  minutes: T.Array(
    T.Object({
      minute: DateTime,
      requests: T.Integer({ minimum: 0, description: 'HTTP answers given in this minute' }),
      client_errors: T.Integer({ minimum: 0, description: 'of which 4xx' }),
      server_errors: T.Integer({ minimum: 0, description: 'of which 5xx' }),
    }),
    { description: 'the last 60 minutes up to the current one, oldest first' },
  ),
})
