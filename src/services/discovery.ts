/**
 * Discovery and the capability catalog (docs/protocol.md §3): checks every query parameter, turns free text into
 * safe search inputs and pages through public, active agents in (last_active_at desc, public_key) order.
 */
import { badRequest, type FieldErrors } from '../errors.ts'
import { iso } from '../lib/clock.ts'
import { parseExact } from '../lib/json-text.ts'
import type { Logger } from '../lib/logger.ts'
import type { DiscoveryFilter, DiscoveryRecord } from './models/records.ts'
import type { DiscoveryStore } from './ports.ts'
import type { CapabilityJson } from './agents.ts'
import { parseRfc3339 } from './authenticator.ts'
import { decodeCursor, encodeCursor, parseIntInRange, textSearch } from './discovery-params.ts'
import {
  CapabilitiesQuery,
  DEFAULT_CATALOG_LIMIT,
  DEFAULT_DISCOVER_LIMIT,
  DiscoverQuery,
  MAX_CATALOG_LIMIT,
  MAX_DISCOVER_LIMIT,
  MAX_NAME_CHARS,
  MAX_Q_CHARS,
  MAX_Q_WORDS,
  MAX_TAGS,
  TAG_PATTERN,
  TAG_PREFIX_PATTERN,
} from './models/discovery.ts'
import { charCount } from './models/text.ts'
import { validate } from './validate.ts'
import type { CapabilityCatalogJson, DiscoverResultJson, DiscoveryEntryJson } from '../client/types.ts'

/** The wire shapes are the client's (src/client/types.ts): one definition for both sides. */
export type { CapabilityCatalogJson, DiscoverResultJson, DiscoveryEntryJson }

/** Query parameters as the HTTP layer hands them over: text, and text lists for repeated names. */
export type RawQuery = Record<string, string | string[] | undefined>

/** The one serializer of DiscoveryEntry: exactly the four fields of docs/protocol.md §3, display_name null when unset. */
export function discoveryEntryToJson(row: DiscoveryRecord): DiscoveryEntryJson {
  return {
    public_key: row.publicKey,
    display_name: row.displayName,
    last_active_at: iso(row.lastActiveAt),
    capabilities: parseExact(row.capabilities) as CapabilityJson[],
  }
}

const asList = (v: string | string[] | undefined): string[] | undefined => (v === undefined ? undefined : Array.isArray(v) ? v : [v])
/** A repeated single-valued parameter keeps its last value, as the HTTP layer does. */
const asOne = (v: string | string[] | undefined): string | undefined => (Array.isArray(v) ? v[v.length - 1] : v)

export class DiscoveryService {
  constructor(
    private readonly store: DiscoveryStore,
    private readonly logger: Logger,
  ) {}

  /** GET /v1/discover: one page of matching agents and the cursor of the next. */
  async discover(raw: RawQuery): Promise<DiscoverResultJson> {
    const filter = this.parseDiscover(raw)
    if (filter === 'empty') return { agents: [], has_more: false, next_cursor: null }
    const limit = filter.limit
    const rows = await this.search({ ...filter, limit: limit + 1 })
    const hasMore = rows.length > limit
    const page = hasMore ? rows.slice(0, limit) : rows
    const last = page[page.length - 1]
    return {
      agents: page.map(discoveryEntryToJson),
      has_more: hasMore,
      next_cursor: hasMore ? encodeCursor({ lastActiveAt: last.lastActiveAt, publicKey: last.publicKey }) : null,
    }
  }

  /**
   * Runs the search. User text only ever reaches FTS5 as quoted strings, so the engine cannot reject it;
   * should it still refuse an expression, the caller gets a 400 naming `q`, never a 500.
   */
  private async search(filter: DiscoveryFilter): Promise<DiscoveryRecord[]> {
    try {
      return await this.store.search(filter)
    } catch (err) {
      if (filter.words.length === 0 || !/fts5|tsquery|unterminated|syntax error|malformed MATCH/i.test(String(err))) throw err
      this.logger.warn('full-text query refused', { words: filter.words, error: String(err) })
      throw badRequest('Invalid query parameters', { q: 'cannot be searched' })
    }
  }

  /** GET /v1/capabilities: tags of public active agents with their counts, most used first. */
  async catalog(raw: RawQuery): Promise<CapabilityCatalogJson> {
    refuseUnknown(raw, ['prefix', 'limit'])
    const query = validate(CapabilitiesQuery, defined({ prefix: asOne(raw.prefix), limit: asOne(raw.limit) }), 'query parameters')
    const fields: FieldErrors = {}
    const prefix = query.prefix ?? ''
    if (!TAG_PREFIX_PATTERN.test(prefix)) fields.prefix = 'must be at most 64 characters of A-Z a-z 0-9 _ : . -'
    const limit = query.limit === undefined ? DEFAULT_CATALOG_LIMIT : parseIntInRange(query.limit, 1, MAX_CATALOG_LIMIT)
    if (limit === null) fields.limit = `must be an integer from 1 to ${MAX_CATALOG_LIMIT}`
    if (Object.keys(fields).length) throw badRequest('Invalid query parameters', fields)
    const rows = await this.store.catalog({ prefix: prefix.toLowerCase(), limit: limit as number })
    return { capabilities: rows.map((r) => ({ tag: r.tag, agent_count: r.agentCount })) }
  }

  /**
   * Checks and normalizes the discover parameters. Returns 'empty' when the answer is known to be empty
   * without a search (a `q` of punctuation only). Decisions where docs/protocol.md §3 is silent: an empty `q` or
   * `name` counts as absent; an invalid or empty `tag` is a 400.
   */
  parseDiscover(raw: RawQuery): (DiscoveryFilter & { limit: number }) | 'empty' {
    refuseUnknown(raw, ['tag', 'q', 'name', 'active_since', 'limit', 'cursor'])
    const query = validate(
      DiscoverQuery,
      defined({
        tag: asList(raw.tag),
        q: asOne(raw.q),
        name: asOne(raw.name),
        active_since: asOne(raw.active_since),
        limit: asOne(raw.limit),
        cursor: asOne(raw.cursor),
      }),
      'query parameters',
    )
    const fields: FieldErrors = {}

    const tags = [...new Set((query.tag ?? []).map((t) => t.toLowerCase()))]
    const badTag = (query.tag ?? []).find((t) => !TAG_PATTERN.test(t))
    if (badTag !== undefined) fields.tag = `"${truncate(badTag)}" is not a tag: 1–64 characters of A-Z a-z 0-9 _ : . -`
    else if (tags.length > MAX_TAGS) fields.tag = `at most ${MAX_TAGS} tags`

    const text = textSearch(query.q)
    if (query.q !== undefined && charCount(query.q) > MAX_Q_CHARS) fields.q = `must be at most ${MAX_Q_CHARS} characters`
    else if (text.kind !== 'absent' && text.words > MAX_Q_WORDS) fields.q = `must have at most ${MAX_Q_WORDS} words`

    const name = query.name === '' ? undefined : query.name
    if (name !== undefined && charCount(name) > MAX_NAME_CHARS) fields.name = `must be at most ${MAX_NAME_CHARS} characters`
    else if (name?.includes('\u0000')) fields.name = 'must not contain NUL characters'

    let activeSince: number | null = null
    if (query.active_since !== undefined) {
      activeSince = parseRfc3339(query.active_since)
      if (activeSince === null) fields.active_since = 'must be an RFC 3339 date-time, e.g. 2026-11-22T10:00:00Z'
    }

    const limit = query.limit === undefined ? DEFAULT_DISCOVER_LIMIT : parseIntInRange(query.limit, 1, MAX_DISCOVER_LIMIT)
    if (limit === null) fields.limit = `must be an integer from 1 to ${MAX_DISCOVER_LIMIT}`

    const after = query.cursor === undefined ? null : decodeCursor(query.cursor)
    if (query.cursor !== undefined && after === null) fields.cursor = 'is not a cursor from next_cursor'

    // no filter at all lists every public agent, most recently active first (MRP marks every parameter optional)
    if (Object.keys(fields).length) throw badRequest('Invalid query parameters', fields)
    if (text.kind === 'none') return 'empty'
    return {
      tags,
      words: text.kind === 'match' ? text.terms : [],
      nameContains: name === undefined ? null : name,
      activeSince,
      after,
      limit: limit as number,
    }
  }
}

/** Drops undefined values so that absent and undefined mean the same to the validator. */
function defined(raw: RawQuery): RawQuery {
  const out: RawQuery = {}
  for (const [k, v] of Object.entries(raw)) if (v !== undefined) out[k] = v
  return out
}

/** An unknown query parameter is a 400 naming it (docs/protocol.md §11): a mistyped filter must not widen a search. */
function refuseUnknown(raw: RawQuery, known: string[]): void {
  const unknown = Object.keys(raw).filter((k) => !known.includes(k))
  if (unknown.length) throw badRequest('Invalid query parameters', Object.fromEntries(unknown.map((k) => [k, 'unknown parameter'])))
}

const truncate = (s: string) => (s.length > 70 ? `${s.slice(0, 67)}...` : s)
