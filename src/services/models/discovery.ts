/**
 * Wire shapes of discovery and the capability catalog (docs/protocol.md §3); used for validation and the OpenAPI
 * document. Query values arrive as text; the service checks their ranges and gives field-named 400s.
 */
import { Type as T } from '@sinclair/typebox'
import { Capability, PublicKey } from './agent.ts'
import { Text } from './text.ts'

export const MAX_DISCOVER_LIMIT = 100
export const DEFAULT_DISCOVER_LIMIT = 20
export const MAX_CATALOG_LIMIT = 1000
export const DEFAULT_CATALOG_LIMIT = 1000
/** A search box, not a document: keeps one request's FTS work bounded. */
export const MAX_Q_CHARS = 512
export const MAX_Q_WORDS = 32
/** A display name is at most 256 characters (docs/protocol.md §2.1), so a longer substring can never match. */
export const MAX_NAME_CHARS = 256
/** Each tag adds one index probe per candidate; 20 is the most one capability may carry (docs/protocol.md §2.1). */
export const MAX_TAGS = 20
export const TAG_PATTERN = /^[A-Za-z0-9_:.-]{1,64}$/
export const TAG_PREFIX_PATTERN = /^[A-Za-z0-9_:.-]{0,64}$/

export const DiscoverQuery = T.Object(
  {
    tag: T.Optional(
      T.Array(Text(), {
        maxItems: MAX_TAGS,
        description: 'Capability tag (1–64 of A-Z a-z 0-9 _ : . -), case-insensitive; repeat for AND (at most 20)',
      }),
    ),
    q: T.Optional(
      Text({
        maxChars: MAX_Q_CHARS,
        description:
          'Full-text search over capability names, descriptions and display names; words are ANDed and each matches ' +
          'as a prefix; punctuation is text, never query syntax (at most 32 words, 512 characters)',
      }),
    ),
    name: T.Optional(Text({ maxChars: MAX_NAME_CHARS, description: 'Case-insensitive substring of display_name; % and _ are literal' })),
    active_since: T.Optional(T.String({ description: 'RFC 3339; only agents with last_active_at at or after it' })),
    limit: T.Optional(T.String({ pattern: '^[0-9]{1,9}$', description: 'Page size, integer 1–100 (default 20)' })),
    cursor: T.Optional(T.String({ description: 'Opaque, from next_cursor of the previous page' })),
  },
  { additionalProperties: false, description: 'Every parameter is optional; with no filter, every public agent, most recently active first' },
)

export const CapabilitiesQuery = T.Object(
  {
    prefix: T.Optional(Text({ maxChars: 64, description: 'Only tags starting with it (case-insensitive)' })),
    limit: T.Optional(T.String({ pattern: '^[0-9]{1,9}$', description: 'Number of tags, integer 1–1000 (default 1000)' })),
  },
  { additionalProperties: false },
)

export const DiscoveryEntry = T.Object({
  public_key: PublicKey,
  display_name: T.Union([T.String(), T.Null()], { description: 'null when unset' }),
  last_active_at: T.String({ format: 'date-time' }),
  capabilities: T.Array(Capability),
})

export const DiscoverResult = T.Object({
  agents: T.Array(DiscoveryEntry),
  has_more: T.Boolean(),
  next_cursor: T.Union([T.String(), T.Null()]),
})

export const CapabilityCatalog = T.Object({
  capabilities: T.Array(T.Object({ tag: T.String(), agent_count: T.Integer({ minimum: 1 }) })),
})
