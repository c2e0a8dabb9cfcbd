/**
 * A typed client for the relay: signs every request and covers every endpoint. The CLI and the tests
 * use it; other TypeScript agents can import it (`import { RelayClient } from 'agent-relay/client'`).
 */
import type { AgentJson, CapabilityJson } from '../services/agents.ts'
import type { CapabilityCatalogJson, DiscoverResultJson, DiscoveryEntryJson } from '../services/discovery.ts'
import { Transport, buildQuery, readJson, type ClientOptions } from './transport.ts'

export { RelayApiError, Transport, buildQuery, type ClientOptions, type FetchLike, type Query } from './transport.ts'
export { generateKeyPair, keyPairFromSeed, signRequest, signWsAuth, decodeKeyFile, encodeKeyFile, type KeyPair } from '../auth/sign.ts'
export type { AgentJson, CapabilityJson, CapabilityCatalogJson, DiscoverResultJson, DiscoveryEntryJson }

export interface AgentPatchInput {
  display_name?: string | null
  visibility?: 'public' | 'private'
  inbox_policy?: 'open' | 'closed' | 'allowlist' | 'blocklist'
  metadata?: Record<string, unknown>
  capabilities?: CapabilityJson[]
}

/** Parameters of GET /v1/discover (SPEC §3); at least one of tag, q, name, active_since. */
export interface DiscoverQueryInput {
  /** One tag or several (ANDed). */
  tag?: string | string[]
  q?: string
  name?: string
  /** RFC 3339 text or a Date. */
  active_since?: string | Date
  limit?: number
  cursor?: string
}

export interface CapabilitiesQueryInput {
  prefix?: string
  limit?: number
}

export class RelayClient {
  readonly transport: Transport

  constructor(opts: ClientOptions) {
    this.transport = new Transport(opts)
  }

  get publicKey(): string {
    return this.transport.keys.publicKey
  }

  // --- health (unsigned) ---
  async health(path: '' | '/ready' | '/details' = ''): Promise<any> {
    const res = await fetchUnsigned(this.transport, `/v1/health${path}`)
    return res.json()
  }

  // --- agents (SPEC §2) ---
  getAgent(publicKey: string = this.publicKey): Promise<AgentJson> {
    return this.transport.json('GET', `/v1/agents/${encodeURIComponent(publicKey)}`)
  }

  updateProfile(patch: AgentPatchInput): Promise<AgentJson> {
    return this.transport.json('PATCH', `/v1/agents/${this.publicKey}`, patch)
  }

  deleteAgent(): Promise<void> {
    return this.transport.json('DELETE', `/v1/agents/${this.publicKey}`)
  }

  async getCapabilities(publicKey: string = this.publicKey): Promise<CapabilityJson[]> {
    const res = await this.transport.json<{ capabilities: CapabilityJson[] }>(
      'GET',
      `/v1/agents/${encodeURIComponent(publicKey)}/capabilities`,
    )
    return res.capabilities
  }

  // --- discovery (SPEC §3) ---
  /** One page of public, active agents; pass `next_cursor` back as `cursor` for the next page. */
  discover(query: DiscoverQueryInput): Promise<DiscoverResultJson> {
    const { active_since, ...rest } = query
    const since = active_since instanceof Date ? active_since.toISOString() : active_since
    return this.transport.json('GET', '/v1/discover' + buildQuery({ ...rest, active_since: since }))
  }

  /** Every page of a discovery query, following next_cursor until has_more is false. */
  async *discoverAll(query: Omit<DiscoverQueryInput, 'cursor'>): AsyncGenerator<DiscoveryEntryJson> {
    let cursor: string | undefined
    do {
      const page = await this.discover({ ...query, cursor })
      yield* page.agents
      cursor = page.next_cursor ?? undefined
    } while (cursor)
  }

  /** The capability catalog: tags with counts of public, active agents, most used first. */
  async capabilities(query: CapabilitiesQueryInput = {}): Promise<CapabilityCatalogJson['capabilities']> {
    const res = await this.transport.json<CapabilityCatalogJson>('GET', '/v1/capabilities' + buildQuery({ ...query }))
    return res.capabilities
  }

  /** Any signed call, for endpoints without a helper. */
  call<T>(method: string, path: string, query?: Parameters<typeof buildQuery>[0], body?: unknown): Promise<T> {
    return this.transport.json<T>(method, path + buildQuery(query), body)
  }
}

function fetchUnsigned(transport: Transport, path: string): Promise<Response> {
  return transport.fetchFn(new Request(transport.baseUrl + path))
}

export { readJson }
