/**
 * The embedded default: every storage port on one SQLite file in WAL mode. Reads run on a reader
 * connection and see committed data only; every write runs in a unit of work on the writer connection
 * (grouped commits, savepoints, lock waits on timers — see unit-of-work.ts), including the single
 * writes made outside an explicit transaction.
 */
import type { Database } from 'bun:sqlite'
import type { Logger } from '../../lib/logger.ts'
import type { RelayFigures, Storage, Stores } from '../../services/ports.ts'
import { SlidingWindowCounters } from '../../lib/sliding-window.ts'
import { SqliteAclStore } from './acl-store.ts'
import { AclOwners } from './acl-owners.ts'
import { SqliteAdminQueries } from './admin-queries.ts'
import { SqliteAdmissionStore } from './admission-store.ts'
import { AgentCache, SqliteAgentStore } from './agents-store.ts'
import { SqliteBlobRecordStore } from './blobs-store.ts'
import { Checkpointer } from './checkpointer.ts'
import { closeConnection, openRelayDatabase, type Durability } from './database.ts'
import { SqliteDiscoveryStore } from './discovery-store.ts'
import { mapSqliteError } from './errors.ts'
import { SqliteMessageStore } from './messages-store.ts'
import { SqliteReplayStore } from './replay-store.ts'
import { SqliteStateStore } from './state-store.ts'
import { StatsRepo } from './stats-repo.ts'
import { SqliteUnitOfWork } from './unit-of-work.ts'
import { SqliteWebhookStore } from './webhooks-store.ts'
import { WalSync } from './wal-sync.ts'
import { probeWithin } from '../../lib/probe.ts'
import { topLevelStore } from '../top-level.ts'

export interface SqliteStorageOptions {
  /** The database file (created with its directory's permissions if missing). */
  path: string
  /** How long writes wait for another process's write lock before answering 503. */
  lockWaitMs: number
  logger: Logger
  /** The current time, to load the replay window. */
  now: number
  /** What an answered write survives (default `process`; see database.ts). */
  durability?: Durability
  /**
   * A command beside a running relay (relay admin), not the relay itself: it takes over nothing the
   * relay holds (webhook claims) and runs no checkpoints.
   */
  tool?: boolean
}

/** The methods of each store that write: at the top level they run as a unit of work of their own. */
const WRITES = {
  agents: ['create', 'createCapped', 'updateProfile', 'touch', 'delete', 'suspend', 'unsuspend'],
  messages: ['insert', 'markDeliveredFor', 'markDelivered', 'expireBatch', 'removeExpiredBatch', 'removeAddressedTo'],
  acl: ['insert', 'setType', 'delete', 'removeOwnedBy'],
  blobs: ['insert', 'delete', 'extendExpiry', 'removeExpiredBatch', 'removeOwnedUnreferenced', 'claimContent', 'settleContent', 'markContentDeleting', 'forgetContent'],
  webhooks: ['upsert', 'delete', 'cancelDeliveries', 'enqueue', 'claimDue', 'release', 'recordFailure', 'finish', 'resetFailures', 'addFailure', 'removeFor'],
  state: ['setNumber'],
} as const satisfies { [K in keyof Stores]: readonly (keyof Stores[K])[] }

type TxStores = Stores & { admission: SqliteAdmissionStore }

/**
 * A store as used outside a transaction: its reads on the reader connection (driver errors mapped),
 * its writes as units of work on the writer.
 */
function topLevel<S extends object>(reader: S, writes: readonly string[], run: (fn: (tx: TxStores) => Promise<unknown>) => Promise<unknown>, pick: (tx: TxStores) => S): S {
  return topLevelStore(reader, writes, run, pick, readMapped)
}

/** Every method of a read-only store on the reader, with SQLite's errors mapped. */
function mappedReads<S extends object>(store: S): S {
  return topLevelStore(store, [], () => Promise.resolve(), () => store, readMapped)
}

/**
 * Calls a reader-store method with SQLite's errors mapped (see errors.ts). Reads run synchronously, so
 * their promise is settled already: a fulfilled one is handed on as it is (no promise more per read), a
 * rejected one with its error mapped.
 */
export function readMapped(method: (...args: unknown[]) => unknown, args: unknown[]): unknown {
  let result: unknown
  try {
    result = method(...args)
  } catch (err) {
    throw mapSqliteError(err)
  }
  if (!(result instanceof Promise)) return result
  switch (Bun.peek.status(result)) {
    case 'fulfilled':
      return result
    case 'rejected': {
      const err = Bun.peek(result)
      result.catch(() => {})
      return Promise.reject(mapSqliteError(err))
    }
    default:
      return result.catch((err) => Promise.reject(mapSqliteError(err)))
  }
}

export class SqliteStorage implements Storage {
  readonly kind = 'sqlite'
  readonly writer: Database
  readonly reader: Database
  readonly uow: SqliteUnitOfWork<TxStores>
  readonly agents
  readonly messages
  readonly acl
  readonly blobs
  readonly webhooks
  readonly state
  readonly admission
  readonly replay: SqliteReplayStore
  readonly rates = new SlidingWindowCounters()
  readonly discovery: SqliteDiscoveryStore
  /** Operator figures (relay admin stats, metrics), on the reader. */
  readonly statsRepo: StatsRepo
  readonly stats = { figures: async (now: number) => readMapped(() => this.statsRepo.all(now), []) as RelayFigures }
  /** Operator listings (relay admin, /v1/admin), on the reader. */
  readonly adminQueries: SqliteAdminQueries
  private readonly checkpointer: Checkpointer
  private readonly walSync: WalSync | null
  readonly durability: Durability
  private closed = false
  private probes = 0
  private readonly runningJobs = new Set<string>()

  constructor(private readonly opts: SqliteStorageOptions) {
    const { writer, reader } = openRelayDatabase(opts.path)
    this.writer = writer
    this.reader = reader
    this.checkpointer = new Checkpointer(writer, opts.path, opts.logger).onWritersFree(() => this.uow.retryLockNow())
    if (!opts.tool) this.checkpointer.start()
    const cache = new AgentCache()
    const aclOwners = new AclOwners(writer)
    const onCommit = (step: () => void) => this.uow.onCommit(step)
    const tx: TxStores = {
      agents: new SqliteAgentStore(writer, cache, onCommit),
      messages: new SqliteMessageStore(writer),
      acl: new SqliteAclStore(writer, aclOwners),
      blobs: new SqliteBlobRecordStore(writer),
      webhooks: new SqliteWebhookStore(writer),
      state: new SqliteStateStore(writer),
      admission: new SqliteAdmissionStore(writer),
    }
    if (!opts.tool) (tx.webhooks as SqliteWebhookStore).voidLeases(opts.now)
    this.durability = opts.durability ?? 'process'
    // signed requests record their signature in a file of their own, which another process's lock on
    // this one does not block; each commit here also carries the entries not yet durable there
    this.replay = new SqliteReplayStore({
      databasePath: opts.path,
      main: writer,
      mainWrite: (op) => this.uow.run(async () => op()),
      lockWaitMs: opts.lockWaitMs,
      durability: this.durability,
      logger: opts.logger,
      now: opts.now,
      tool: opts.tool,
    })
    this.walSync = this.durability === 'fsync' ? new WalSync(opts.path) : null
    this.uow = new SqliteUnitOfWork<TxStores>(writer, tx, {
      lockWaitMs: opts.lockWaitMs,
      warn: (message, fields) => opts.logger.warn(message, fields),
      beforeCommit: () => this.replay.copyInto((step) => this.uow.onCommit(step)),
      sync: this.walSync ? () => this.walSync!.sync() : undefined,
    })
    const run = (fn: (tx: TxStores) => Promise<unknown>) => this.uow.run(fn)
    this.agents = topLevel(new SqliteAgentStore(reader, cache), WRITES.agents, run, (t) => t.agents)
    this.messages = topLevel(new SqliteMessageStore(reader), WRITES.messages, run, (t) => t.messages)
    this.acl = topLevel(new SqliteAclStore(reader, aclOwners), WRITES.acl, run, (t) => t.acl)
    this.blobs = topLevel(new SqliteBlobRecordStore(reader), WRITES.blobs, run, (t) => t.blobs)
    this.webhooks = topLevel(new SqliteWebhookStore(reader), WRITES.webhooks, run, (t) => t.webhooks)
    this.state = topLevel(new SqliteStateStore(reader), WRITES.state, run, (t) => t.state)
    this.admission = topLevel(new SqliteAdmissionStore(reader), ['allow', 'revoke'], run, (t) => t.admission)
    this.discovery = mappedReads(new SqliteDiscoveryStore(reader))
    this.statsRepo = new StatsRepo(reader, opts.path)
    this.adminQueries = mappedReads(new SqliteAdminQueries(reader))
  }

  transaction<T>(fn: (tx: Stores) => Promise<T>): Promise<T> {
    return this.uow.run(fn)
  }

  /** The WAL checkpointed while a background writer pauses (Checkpointer.caughtUp). */
  caughtUp(): Promise<void> {
    return this.checkpointer.caughtUp()
  }

  /** One process owns the database: a job runs unless a run of it has not finished yet. */
  async exclusive<T>(job: string, fn: () => Promise<T>): Promise<{ ran: true; value: T } | { ran: false }> {
    if (this.runningJobs.has(job)) return { ran: false }
    this.runningJobs.add(job)
    try {
      return { ran: true, value: await fn() }
    } finally {
      this.runningJobs.delete(job)
    }
  }

  async health() {
    const t0 = performance.now()
    this.reader.query('SELECT 1').get()
    return {
      status: 'ok' as const,
      engine: 'sqlite',
      latency_ms: Math.round((performance.now() - t0) * 1000) / 1000,
      writes_waiting: this.uow.waiting,
      commits: this.uow.stats.commits,
      group_reruns: this.uow.stats.reruns,
      lock_waits: this.uow.stats.lock_waits,
      lock_timeouts: this.uow.stats.lock_timeouts,
      durability: this.durability,
      syncs: this.walSync?.syncs ?? null,
      checkpoints: this.checkpointer.report(),
      replay_log: this.replay.report(),
    }
  }

  /** Whether a write goes through now; a locked database is not ready (answered within ~250 ms). */
  async ready(): Promise<string | null> {
    return probeWithin(this.uow.run(async (tx) => tx.state.setNumber('ready_probe', ++this.probes)), 250, 'database is locked by another process', 'database not writable')
  }


  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    await this.uow.drain()
    await this.replay.close()
    await this.checkpointer.stop()
    try {
      if (!this.opts.tool) this.writer.run('PRAGMA wal_checkpoint(TRUNCATE)')
    } catch (err) {
      this.opts.logger.warn('WAL checkpoint failed', { error: String(err) })
    }
    this.walSync?.close()
    closeConnection(this.reader)
    closeConnection(this.writer)
  }
}
