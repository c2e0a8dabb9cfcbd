/**
 * Agent profiles (SPEC §2): read, merge-patch with every limit of §2.1, delete with everything §2.2
 * lists, and operator suspension (§2.3).
 */
import { RelayError, badRequest, type FieldErrors } from '../errors.ts'
import type { Clock } from '../lib/clock.ts'
import { iso } from '../lib/clock.ts'
import type { AgentProfileFields, AgentRow, AgentsRepo } from '../storage/agents-repo.ts'
import type { Db } from '../storage/db.ts'
import type { RelayEvents } from './events.ts'
import { AgentPatch } from './models/agent.ts'
import { jsonBytes, validate } from './validate.ts'

const MAX_JSON_OBJECT_BYTES = 16 * 1024

export interface CapabilityJson {
  name: string
  description?: string
  tags?: string[]
  input_schema?: Record<string, unknown>
  version?: string
}

export interface AgentJson {
  public_key: string
  display_name?: string
  status: 'active' | 'suspended'
  visibility: 'public' | 'private'
  inbox_policy: 'open' | 'closed' | 'allowlist' | 'blocklist'
  created_at: string
  last_active_at: string
  metadata: Record<string, unknown>
  capabilities: CapabilityJson[]
}

/** The one serializer for the Agent resource. */
export function agentToJson(row: AgentRow): AgentJson {
  const out: AgentJson = {
    public_key: row.publicKey,
    status: row.status,
    visibility: row.visibility,
    inbox_policy: row.inboxPolicy,
    created_at: iso(row.createdAt),
    last_active_at: iso(row.lastActiveAt),
    metadata: JSON.parse(row.metadata),
    capabilities: JSON.parse(row.capabilities),
  }
  if (row.displayName !== null) out.display_name = row.displayName
  return out
}

/** Checks the rules a schema cannot express and normalizes tags; throws 400 naming fields. */
function checkCapabilities(caps: CapabilityJson[], fields: FieldErrors): CapabilityJson[] {
  const seen = new Set<string>()
  return caps.map((cap, i) => {
    if (seen.has(cap.name)) fields[`capabilities[${i}].name`] = `duplicate capability name "${cap.name}"`
    seen.add(cap.name)
    if (cap.input_schema !== undefined && jsonBytes(cap.input_schema) > MAX_JSON_OBJECT_BYTES) {
      fields[`capabilities[${i}].input_schema`] = 'must be at most 16 KiB serialized'
    }
    if (cap.tags === undefined) return cap
    return { ...cap, tags: [...new Set(cap.tags.map((t) => t.toLowerCase()))] }
  })
}

/** Cleanup steps other features register so that DELETE removes everything §2.2 lists. */
export type AgentDeletionStep = (publicKey: string, now: number) => void

export class AgentsService {
  private readonly deletionSteps: AgentDeletionStep[] = []

  constructor(
    private readonly db: Db,
    private readonly repo: AgentsRepo,
    private readonly clock: Clock,
    private readonly events: RelayEvents,
  ) {}

  get(publicKey: string): AgentRow {
    const row = this.repo.find(publicKey)
    if (!row) throw new RelayError('agent_not_found', 'No agent with this public key')
    return row
  }

  /** Merge semantics of §2.2: a present field replaces that field whole; absent fields stay. */
  patch(caller: string, target: string, body: unknown): AgentRow {
    this.assertOwner(caller, target)
    const patch = validate(AgentPatch, body ?? {})
    const fields: FieldErrors = {}
    const update: AgentProfileFields = {}
    if (patch.display_name !== undefined) update.displayName = patch.display_name
    if (patch.visibility !== undefined) update.visibility = patch.visibility
    if (patch.inbox_policy !== undefined) update.inboxPolicy = patch.inbox_policy
    if (patch.metadata !== undefined) {
      if (jsonBytes(patch.metadata) > MAX_JSON_OBJECT_BYTES) fields.metadata = 'must be at most 16 KiB serialized'
      update.metadata = JSON.stringify(patch.metadata)
    }
    if (patch.capabilities !== undefined) {
      update.capabilities = JSON.stringify(checkCapabilities(patch.capabilities, fields))
    }
    if (Object.keys(fields).length) throw badRequest('Invalid request body', fields)
    if (Object.keys(update).length) this.repo.updateProfile(target, update, this.clock.now())
    return this.get(target)
  }

  /** Registers a step that runs inside the delete transaction. */
  onDelete(step: AgentDeletionStep): void {
    this.deletionSteps.push(step)
  }

  /** Deletes the caller's agent and everything of §2.2 in one transaction, then closes its channels. */
  delete(caller: string, target: string): void {
    this.assertOwner(caller, target)
    const now = this.clock.now()
    this.db.transaction(() => {
      for (const step of this.deletionSteps) step(target, now)
      this.repo.delete(target)
    })
    this.events.emit('agentGone', { publicKey: target, reason: 'deleted' })
  }

  /** Operator suspension (§2.3); creates a suspended record for an unknown key. */
  suspend(publicKey: string, reason: string | null): void {
    this.repo.suspend(publicKey, reason, this.clock.now())
    this.events.emit('agentGone', { publicKey, reason: 'suspended' })
  }

  unsuspend(publicKey: string): boolean {
    return this.repo.unsuspend(publicKey, this.clock.now())
  }

  private assertOwner(caller: string, target: string): void {
    if (caller !== target) throw new RelayError('forbidden', 'Only the agent itself may change or delete its profile')
  }
}
