/**
 * Agent profiles (docs/protocol.md §2): read, merge-patch with every limit of §2.1, delete with everything §2.2
 * lists, and operator suspension (§2.3).
 */
import { RelayError } from '../errors.ts'
import type { Clock } from '../lib/clock.ts'
import { iso } from '../lib/clock.ts'
import { parseExact } from '../lib/json-text.ts'
import type { AgentJson, CapabilityJson } from '../client/types.ts'
import { parseAgentPatch, parseCapabilitiesBody } from './agents-input.ts'
import type { AgentRecord } from './models/records.ts'
import type { Signals, Storage, Stores } from './ports.ts'

/** The wire shapes are the client's (src/client/types.ts): one definition for both sides. */
export type { AgentJson, CapabilityJson }

/** The one serializer for the Agent resource; `display_name` is `null` when unset, as MRP documents it. */
export function agentToJson(row: AgentRecord): AgentJson {
  return {
    public_key: row.publicKey,
    display_name: row.displayName,
    status: row.status,
    visibility: row.visibility,
    inbox_policy: row.inboxPolicy,
    created_at: iso(row.createdAt),
    last_active_at: iso(row.lastActiveAt),
    // numbers come back with the digits they were stored with
    metadata: parseExact(row.metadata) as Record<string, unknown>,
    capabilities: parseExact(row.capabilities) as CapabilityJson[],
  }
}

/**
 * A cleanup step another feature registers so that DELETE removes everything docs/protocol.md §2.2
 * lists (its ACL entries, webhook, messages, blobs); it runs inside the delete's unit of work.
 */
export type AgentDeletionStep = (tx: Stores, publicKey: string, now: number) => Promise<void>

export class AgentsService {
  private readonly deletionSteps: AgentDeletionStep[] = []
  private readonly suspensionSteps: AgentDeletionStep[] = []

  constructor(
    private readonly storage: Storage,
    private readonly clock: Clock,
    private readonly signals: Signals,
  ) {}

  async get(publicKey: string): Promise<AgentRecord> {
    const row = await this.storage.agents.find(publicKey)
    if (!row) throw new RelayError('agent_not_found', 'No agent with this public key')
    return row
  }

  /** Merge semantics of §2.2: a present field replaces that field whole; absent fields stay (see agents-input.ts). */
  async patch(caller: string, target: string, body: unknown): Promise<AgentRecord> {
    this.assertOwner(caller, target)
    const update = parseAgentPatch(body)
    if (Object.keys(update).length) await this.storage.agents.updateProfile(target, update, this.clock.now())
    return this.get(target)
  }

  /** Replaces the caller's capabilities (`POST /v1/agents/me/capabilities`); returns the updated agent. */
  async setCapabilities(caller: string, target: string, body: unknown): Promise<AgentRecord> {
    this.assertOwner(caller, target)
    const capabilities = parseCapabilitiesBody(body)
    await this.storage.agents.updateProfile(target, { capabilities }, this.clock.now())
    return this.get(target)
  }

  /** Registers a step that runs inside the delete's unit of work. */
  onDelete(step: AgentDeletionStep): void {
    this.deletionSteps.push(step)
  }

  /** Deletes the caller's agent and everything of §2.2 in one unit of work, then closes its channels. */
  async delete(caller: string, target: string): Promise<void> {
    this.assertOwner(caller, target)
    const now = this.clock.now()
    await this.storage.transaction(async (tx) => {
      for (const step of this.deletionSteps) await step(tx, target, now)
      await tx.agents.delete(target)
    })
    this.signals.agentGone(target, 'deleted')
  }

  /** Registers a step that runs inside the suspension's unit of work (a suspended agent receives nothing). */
  onSuspend(step: AgentDeletionStep): void {
    this.suspensionSteps.push(step)
  }

  /** Operator suspension (§2.3); creates a suspended record for an unknown key. */
  async suspend(publicKey: string, reason: string | null): Promise<void> {
    const now = this.clock.now()
    await this.storage.transaction(async (tx) => {
      await tx.agents.suspend(publicKey, reason, now)
      for (const step of this.suspensionSteps) await step(tx, publicKey, now)
    })
    this.signals.agentGone(publicKey, 'suspended')
  }

  async unsuspend(publicKey: string): Promise<boolean> {
    return this.storage.agents.unsuspend(publicKey, this.clock.now())
  }

  private assertOwner(caller: string, target: string): void {
    if (caller !== target) throw new RelayError('forbidden', 'Only the agent itself may change or delete its profile')
  }
}
