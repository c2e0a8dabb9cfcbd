/**
 * What a feature module is and what it receives. A feature declares everything it adds to a relay —
 * its routes (each with its auth mode), its jobs, its health probes and readiness checks, the events
 * it listens to, what it does at start and stop — and the composition root installs the features from
 * one ordered list (src/relay.ts). Reading one feature module shows everything it hooks into.
 */
import type { AnyElysia } from 'elysia'
import type { Config } from '../config/config.ts'
import type { JobStep } from '../jobs/scheduler.ts'
import type { Clock } from '../lib/clock.ts'
import type { Logger } from '../lib/logger.ts'
import type { MetricsRegistry } from '../metrics/registry.ts'
import type { AdmissionService } from '../services/admission.ts'
import type { AgentDeletionStep, AgentsService } from '../services/agents.ts'
import type { Authenticator } from '../services/authenticator.ts'
import type { Probe } from '../services/health.ts'
import type { InsertHook } from '../services/messages.ts'
import type { MessageRecord } from '../services/models/records.ts'
import type { ConnectionRegistry, Signals, Storage } from '../services/ports.ts'
import type { PreAuthBudget } from '../http/preauth.ts'

/** Where a relay keeps its files under the data directory. */
export interface DataPaths {
  dataDir: string
  database: string
  blobs: string
  tmp: string
}

/** The shared parts every feature module builds on; made once by the composition root. */
export interface FeatureContext {
  config: Config
  clock: Clock
  logger: Logger
  /** Every stored thing, behind the ports the services own (SQLite by default). */
  storage: Storage
  /** Committed messages and gone agents, to this relay's channels (and other instances in a cluster). */
  signals: Signals
  /** WebSockets per agent over every instance. */
  connections: ConnectionRegistry
  paths: DataPaths
  agents: AgentsService
  /** Operator admission: allowlist, agent cap, new-agent rate (relay admin allow/revoke act on it). */
  admission: AdmissionService
  authenticator: Authenticator
  /** What unauthenticated requests and sockets may cost: rate per address, memory held. */
  preauth: PreAuthBudget
  fetch: typeof fetch
  /** Counters, gauges and histograms for GET /metrics; names in src/metrics/catalog.ts. */
  metrics: MetricsRegistry
}

/** A periodic step, run by the scheduler; `exclusive`: one instance of a cluster at a time. */
export interface FeatureJob {
  name: string
  intervalMs: number
  run: JobStep
  exclusive?: boolean
}

/** The events a feature listens to. */
export interface FeatureEvents {
  /** A message was committed here (`local`) or announced by another instance (`remote`). */
  messageCommitted?: (message: MessageRecord, origin: 'local' | 'remote') => void
  /** In the unit of work that inserts a message (its outbox rows, its attachment links). */
  messageInserting?: InsertHook
  /** An agent was deleted or suspended, here or elsewhere; its channels close. */
  agentGone?: (publicKey: string, reason: 'deleted' | 'suspended') => void
  /** In the unit of work that deletes an agent: what it owned goes with it (docs/protocol.md §2.2). */
  agentDeleting?: AgentDeletionStep
  /** In the unit of work that suspends an agent (docs/protocol.md §2.3). */
  agentSuspending?: AgentDeletionStep
}

export interface Feature<Name extends string = string, Api = unknown> {
  name: Name
  /** An Elysia plugin of the feature's routes; each route declares its `auth` (src/http/route-auth.ts). */
  routes?: AnyElysia
  jobs?: FeatureJob[]
  /** Components of /v1/health/details, by name. */
  probes?: Record<string, Probe>
  /** Checks /v1/health/ready requires, by name: null when fine, else the problem. */
  readiness?: Record<string, () => string | null | Promise<string | null>>
  on?: FeatureEvents
  /** Once the relay serves. */
  start?: () => void | Promise<void>
  /** A graceful stop: after HTTP stops and jobs end, before storage closes; in the list's order. */
  stop?: () => void | Promise<void>
  /** What the rest of the relay (and tests) may use of the feature. */
  api: Api
}

/** Checks a feature's shape and keeps its name and API types for the composition root. */
export const defineFeature = <Name extends string, Api>(feature: Feature<Name, Api>): Feature<Name, Api> => feature
