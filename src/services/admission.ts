/**
 * Operator admission: who may use the relay at all, decided after a request's signature verified and
 * before its agent is used or created (so a refused key never gets a record).
 *
 * - `open` (default): any key becomes an agent on its first request (docs/protocol.md §1.2 step 5).
 * - `allowlist`: only keys the operator listed (`relay admin allow`) may make requests or be created;
 *   others get 403 `forbidden`.
 * - `existing`: agents that exist keep working; new keys get 403.
 *
 * Operator keys (RELAY_ADMIN_KEYS) are admitted in every mode, so the operator can always reach the
 * relay's admin API and console. In every mode a new key is refused when the relay holds `maxAgents` agents, and when its client
 * address created `newAgentsPerHour` agents within the hour. The allowlist is cached in memory and
 * refreshed when its version changes (another process or instance edited it), within the change
 * watcher's interval.
 */
import { RelayError } from '../errors.ts'
import type { Config } from '../config/config.ts'
import type { Clock } from '../lib/clock.ts'
import type { AdmissionGate } from './authenticator.ts'
import type { Storage } from './ports.ts'

export type AdmissionMode = 'open' | 'allowlist' | 'existing'

export interface AdmissionOptions {
  mode: AdmissionMode
  /** Agent records the relay will hold (0 = unlimited). */
  maxAgents: number
  /** New agents one client address may create per hour (0 = unlimited). */
  newAgentsPerHour: number
  /** Operator keys (RELAY_ADMIN_KEYS): admitted in every mode, never counted against the caps. */
  adminKeys?: readonly string[]
}

const HOUR_MS = 3_600_000
/** Addresses whose new agents are counted; beyond it the least recently seen is forgotten. */
const CREATED_MAX = 100_000

/** The admission options of a configuration. */
export function admissionOptions(config: Config): AdmissionOptions {
  return {
    mode: config.admission.mode,
    maxAgents: config.admission.maxAgents,
    newAgentsPerHour: config.rateLimits.newAgentsPerHour,
    adminKeys: config.admin.keys,
  }
}

const refused = (message: string, details: Record<string, unknown> | null = null) => new RelayError('forbidden', message, details)

export class AdmissionService implements AdmissionGate {
  private allowed: Set<string> | null = null
  private version = -1
  /** New agents per client address in the current hour: address → [hour start, count]. */
  private readonly created = new Map<string, { hour: number; n: number }>()
  private readonly adminKeys: ReadonlySet<string>

  constructor(
    private readonly storage: Storage,
    private readonly clock: Clock,
    readonly options: AdmissionOptions,
  ) {
    this.adminKeys = new Set(options.adminKeys ?? [])
  }

  /** Whether the key is one of the operator's (RELAY_ADMIN_KEYS). */
  isAdmin(publicKey: string): boolean {
    return this.adminKeys.has(publicKey)
  }

  /**
   * Refuses (403) a key the relay does not admit; `known` whether it has an agent record. Nothing to
   * wait for (no promise) for a known agent on an open relay: the common case, on every request.
   */
  check(publicKey: string, known: boolean, address?: string | null): Promise<void> | void {
    if (known && this.options.mode === 'open') return
    return this.checkFully(publicKey, known, address)
  }

  private async checkFully(publicKey: string, known: boolean, address?: string | null): Promise<void> {
    const { mode, maxAgents } = this.options
    if (this.adminKeys.has(publicKey)) return
    if (mode === 'allowlist' && !(await this.isListed(publicKey))) {
      throw refused('This relay admits only keys its operator has listed')
    }
    if (known) return
    if (mode === 'existing') throw refused('This relay admits no new agents')
    // an early refusal that stores nothing; the exact check is the creation itself (capFor)
    if (maxAgents > 0 && (await this.storage.agents.count()) >= maxAgents) throw this.capReached(maxAgents)
    if (address) this.countNewAgent(address)
  }

  /**
   * The agent cap for creating `publicKey` (0: none; operator keys are never counted against it).
   * The authenticator creates under it atomically, so concurrent new keys never overshoot.
   */
  capFor(publicKey: string): number {
    return this.adminKeys.has(publicKey) ? 0 : this.options.maxAgents
  }

  capReached(max: number): RelayError {
    return refused(`This relay holds its maximum of ${max} agents and admits no new ones`, { max_agents: max })
  }

  /** Whether `publicKey` may store anything now (blob uploads decide before reading a byte). */
  async mayUse(publicKey: string): Promise<boolean> {
    if (this.options.mode === 'open' || this.adminKeys.has(publicKey)) return true
    if (this.options.mode === 'allowlist') return this.isListed(publicKey)
    return (await this.storage.agents.find(publicKey)) !== null
  }

  /** `relay admin allow`: lists a key; true when it was not listed before. */
  async allow(publicKey: string, note: string | null = null): Promise<boolean> {
    const added = await this.storage.admission.allow(publicKey, note, this.clock.now())
    this.allowed?.add(publicKey)
    return added
  }

  /** `relay admin revoke`: removes a key from the list; false when it was not listed. */
  async revoke(publicKey: string): Promise<boolean> {
    const removed = await this.storage.admission.revoke(publicKey)
    this.allowed?.delete(publicKey)
    return removed
  }

  list() {
    return this.storage.admission.list()
  }

  /** Reloads the cached allowlist when it changed elsewhere; called by the relay's change watcher. */
  async refresh(): Promise<void> {
    if (this.options.mode !== 'allowlist') return
    const version = await this.storage.admission.version()
    if (version === this.version && this.allowed) return
    const list = await this.storage.admission.list()
    this.allowed = new Set(list.map((e) => e.publicKey))
    this.version = version
  }

  private async isListed(publicKey: string): Promise<boolean> {
    if (!this.allowed) await this.refresh()
    return this.allowed?.has(publicKey) ?? false
  }

  private countNewAgent(address: string): void {
    const limit = this.options.newAgentsPerHour
    if (limit <= 0) return
    const hour = Math.floor(this.clock.now() / HOUR_MS)
    const entry = this.created.get(address)
    if (!entry || entry.hour !== hour) {
      // oldest first: an address counted again moves to the end, so the one evicted at the cap is
      // the address seen least recently, never every address at once
      this.created.delete(address)
      this.created.set(address, { hour, n: 1 })
      while (this.created.size > CREATED_MAX) this.created.delete(this.created.keys().next().value as string)
      return
    }
    this.created.delete(address)
    this.created.set(address, entry)
    if (entry.n >= limit) {
      const retryAfter = Math.max(1, Math.ceil(((hour + 1) * HOUR_MS - this.clock.now()) / 1000))
      throw new RelayError(
        'rate_limit_exceeded',
        `Too many new agents from your address: at most ${limit} per hour`,
        { limit, window: '1h', retry_after: retryAfter },
        { 'Retry-After': String(retryAfter) },
      )
    }
    entry.n++
  }
}
