/**
 * Operator actions and views, one implementation for `relay admin` and /v1/admin (docs/protocol.md,
 * "Operator API"): figures, agents with their status, suspension, the admission allowlist, the webhook
 * queue and the running relay's recent errors. Uses only the storage ports.
 */
import { PUBLIC_KEY_PATTERN, isPublicKey } from '../auth/keys.ts'
import { RelayError, badRequest } from '../errors.ts'
import { iso, type Clock } from '../lib/clock.ts'
import { decodePosition, encodePosition } from '../lib/cursor.ts'
import type { RecentEntry, RecentLog } from '../lib/recent-log.ts'
import type { TrafficLog, TrafficMinute } from '../lib/traffic.ts'
import type { AdmissionService } from './admission.ts'
import type { AgentsService } from './agents.ts'
import type { AgentRecord, AgentStatus } from './models/records.ts'
import type { RelayFigures, Storage } from './ports.ts'

/** One agent in the operator's listing. */
export interface AdminAgentJson {
  public_key: string
  display_name?: string
  status: AgentStatus
  suspended_reason?: string
  visibility: string
  inbox_policy: string
  /** How many capabilities the agent declares. */
  capabilities: number
  created_at: string
  last_active_at: string
}

export interface AdminAgentPage {
  agents: AdminAgentJson[]
  has_more: boolean
  next_cursor: string | null
}

export interface AllowedKeyJson {
  public_key: string
  note: string | null
  created_at: string
}

export interface QueuedDeliveryJson {
  delivery_id: string
  public_key: string
  message_id: string
  state: 'pending' | 'in_flight'
  attempts: number
  next_attempt_at: string
  last_error: string | null
  created_at: string
}

export const AGENT_PAGE_DEFAULT = 100
export const AGENT_PAGE_MAX = 10_000
export const QUEUE_PAGE_MAX = 1000
/** Longest suspension reason kept. */
export const MAX_REASON_CHARS = 500
/** Longest allowlist note kept. */
export const MAX_NOTE_CHARS = 500

function capabilityCount(text: string): number {
  try {
    const parsed = JSON.parse(text)
    return Array.isArray(parsed) ? parsed.length : 0
  } catch {
    return 0
  }
}

export function adminAgentToJson(row: AgentRecord): AdminAgentJson {
  const out: AdminAgentJson = {
    public_key: row.publicKey,
    status: row.status,
    visibility: row.visibility,
    inbox_policy: row.inboxPolicy,
    capabilities: capabilityCount(row.capabilities),
    created_at: iso(row.createdAt),
    last_active_at: iso(row.lastActiveAt),
  }
  if (row.displayName !== null) out.display_name = row.displayName
  if (row.suspendedReason !== null) out.suspended_reason = row.suspendedReason
  return out
}

const requireKey = (key: unknown, what = 'public key'): string => {
  if (!isPublicKey(key)) throw badRequest(`Invalid ${what}: expected 43 base64url characters`, { public_key: 'expected 43 base64url characters' })
  return key
}

const optionalText = (value: unknown, field: string, max: number): string | null => {
  if (value === undefined || value === null) return null
  if (typeof value !== 'string') throw badRequest(`${field} must be a string`, { [field]: 'expected a string' })
  if (value.length > max) throw badRequest(`${field} is longer than ${max} characters`, { [field]: `at most ${max} characters` })
  return value.length ? value : null
}

export interface AdminDeps {
  storage: Storage
  clock: Clock
  agents: AgentsService
  admission: AdmissionService
  /** The running relay's recent warnings and errors; absent for a command beside the relay. */
  recent?: RecentLog
  /** HTTP answers per minute of the running relay (absent from the CLI: it serves nothing). */
  traffic?: TrafficLog
}

export class AdminService {
  constructor(private readonly deps: AdminDeps) {}

  /** Agents, messages by effective status, blobs, webhooks and database size. */
  stats(): Promise<RelayFigures> {
    return this.deps.storage.stats.figures(this.deps.clock.now())
  }

  /**
   * Agents oldest first, `limit` per page, optionally only those of one status. `cursor` is the
   * `next_cursor` of the previous page; 400 for anything else.
   */
  async listAgents(opts: { status?: string | null; cursor?: string | null; limit?: number | null } = {}): Promise<AdminAgentPage> {
    const status = opts.status ?? null
    if (status !== null && status !== 'active' && status !== 'suspended') {
      throw badRequest('status must be active or suspended', { status: 'expected active or suspended' })
    }
    const limit = opts.limit ?? AGENT_PAGE_DEFAULT
    if (!Number.isInteger(limit) || limit < 1 || limit > AGENT_PAGE_MAX) {
      throw badRequest(`limit must be an integer from 1 to ${AGENT_PAGE_MAX}`, { limit: `1–${AGENT_PAGE_MAX}` })
    }
    let after: { createdAt: number; publicKey: string } | null = null
    if (opts.cursor) {
      const pos = decodePosition(opts.cursor, PUBLIC_KEY_PATTERN)
      if (!pos) throw badRequest('cursor is not one this relay issued', { cursor: 'not a cursor of this listing' })
      after = { createdAt: pos.n, publicKey: pos.id }
    }
    const rows = await this.deps.storage.adminQueries.listAgents({ status, after, limit: limit + 1 })
    const hasMore = rows.length > limit
    const page = rows.slice(0, limit)
    const last = page[page.length - 1]
    return {
      agents: page.map(adminAgentToJson),
      has_more: hasMore,
      next_cursor: hasMore && last ? encodePosition(last.createdAt, last.publicKey) : null,
    }
  }

  /** One agent as the listing shows it; 404 `agent_not_found` for an unknown key. */
  async agent(publicKey: string): Promise<AdminAgentJson> {
    const row = await this.deps.storage.agents.find(requireKey(publicKey))
    if (!row) throw new RelayError('agent_not_found', 'No agent with this public key')
    return adminAgentToJson(row)
  }

  /**
   * Suspends a key (docs/protocol.md §2.3): its requests are refused, its sockets closed, its pending
   * webhook deliveries cancelled. An unknown key gets a suspended record, so it cannot start later.
   */
  async suspend(publicKey: unknown, reason: unknown = null, from: 'api' | 'host' = 'host'): Promise<AdminAgentJson> {
    const key = requireKey(publicKey)
    // over the API an operator could lock every operator out, itself included, leaving only the host to
    // recover: operator keys are suspended from the host (`relay admin suspend`) or not at all
    if (from === 'api' && this.deps.admission.isAdmin(key)) {
      throw new RelayError('forbidden', 'An operator key (RELAY_ADMIN_KEYS) cannot be suspended over the API; remove it from RELAY_ADMIN_KEYS first, or use relay admin suspend on the host')
    }
    await this.deps.agents.suspend(key, optionalText(reason, 'reason', MAX_REASON_CHARS))
    return this.agent(key)
  }

  /** Lifts a suspension; 404 `agent_not_found` when the key has no record. */
  async unsuspend(publicKey: unknown): Promise<AdminAgentJson> {
    const key = requireKey(publicKey)
    if (!(await this.deps.agents.unsuspend(key))) throw new RelayError('agent_not_found', 'No agent with this public key')
    return this.agent(key)
  }

  /** Lists a key on the admission allowlist; `added` false when it was listed already. */
  async allow(publicKey: unknown, note: unknown = null): Promise<{ added: boolean; entry: AllowedKeyJson }> {
    const key = requireKey(publicKey)
    const added = await this.deps.admission.allow(key, optionalText(note, 'note', MAX_NOTE_CHARS))
    const entry = (await this.allowed()).find((e) => e.public_key === key)
    return { added, entry: entry ?? { public_key: key, note: null, created_at: iso(this.deps.clock.now()) } }
  }

  /** Removes a key from the allowlist; 404 `not_found` when it was not listed. */
  async revoke(publicKey: unknown): Promise<void> {
    const key = requireKey(publicKey)
    if (!(await this.deps.admission.revoke(key))) throw new RelayError('not_found', 'This key is not on the allowlist')
  }

  /** Every listed key, oldest first. */
  async allowed(): Promise<AllowedKeyJson[]> {
    const entries = await this.deps.admission.list()
    return entries.map((e) => ({ public_key: e.publicKey, note: e.note, created_at: iso(e.createdAt) }))
  }

  /** Webhook deliveries pending or in flight, the soonest due first. */
  async webhookQueue(limit = 100): Promise<{ pending_deliveries: number; deliveries: QueuedDeliveryJson[] }> {
    if (!Number.isInteger(limit) || limit < 1 || limit > QUEUE_PAGE_MAX) {
      throw badRequest(`limit must be an integer from 1 to ${QUEUE_PAGE_MAX}`, { limit: `1–${QUEUE_PAGE_MAX}` })
    }
    const [rows, pending] = await Promise.all([this.deps.storage.adminQueries.listQueuedDeliveries(limit), this.deps.storage.webhooks.pendingCount()])
    return {
      pending_deliveries: pending,
      deliveries: rows.map((d) => ({
        delivery_id: d.deliveryId,
        public_key: d.publicKey,
        message_id: d.messageId,
        state: d.state,
        attempts: d.attempts,
        next_attempt_at: iso(d.nextAttemptAt),
        last_error: d.lastError,
        created_at: iso(d.createdAt),
      })),
    }
  }

  /** The running relay's latest warnings and errors, newest first (empty beside a relay). */
  recentErrors(limit = 100): RecentEntry[] {
    return this.deps.recent?.list(limit) ?? []
  }

  /** HTTP answers per minute over the last hour, oldest first. */
  traffic(): TrafficMinute[] {
    return this.deps.traffic?.series(this.deps.clock.now()) ?? []
  }
}
