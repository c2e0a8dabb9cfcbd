/**
 * A typed client for the relay: signs every request and covers every endpoint. The CLI and the tests
 * use it; other TypeScript agents can import it (`import { RelayClient } from 'agent-relay/client'`).
 */
import type { AgentJson, CapabilityJson } from '../services/agents.ts'
import { Transport, buildQuery, readJson, type ClientOptions } from './transport.ts'

export { RelayApiError, Transport, buildQuery, type ClientOptions, type FetchLike, type Query } from './transport.ts'
export { generateKeyPair, keyPairFromSeed, signRequest, signWsAuth, decodeKeyFile, encodeKeyFile, type KeyPair } from '../auth/sign.ts'
export type { AgentJson, CapabilityJson }

export interface AgentPatchInput {
  display_name?: string | null
  visibility?: 'public' | 'private'
  inbox_policy?: 'open' | 'closed' | 'allowlist' | 'blocklist'
  metadata?: Record<string, unknown>
  capabilities?: CapabilityJson[]
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

  /** Any signed call, for endpoints without a helper. */
  call<T>(method: string, path: string, query?: Parameters<typeof buildQuery>[0], body?: unknown): Promise<T> {
    return this.transport.json<T>(method, path + buildQuery(query), body)
  }
}

function fetchUnsigned(transport: Transport, path: string): Promise<Response> {
  return transport.fetchFn(new Request(transport.baseUrl + path))
}

export { readJson }
