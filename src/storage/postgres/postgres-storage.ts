/**
 * Cluster mode: every storage port on one PostgreSQL database that several relay instances share. Reads
 * outside a transaction run on the pool and see committed data; a write of several statements runs in a
 * transaction of its own; `transaction` is one real PostgreSQL transaction with the stores bound to it,
 * except that grouped units (accepted messages) queued in one turn share one (group-commit.ts).
 * Driver failures leave every method mapped (errors.ts): unreachable → 503, disk full → 507.
 */
import type { SQL } from 'bun'
import type { Logger } from '../../lib/logger.ts'
import type { Storage, Stores, UnitOptions } from '../../services/ports.ts'
import { PgAclStore } from './acl-store.ts'
import { PgAdminQueries } from './admin-queries.ts'
import { PgAdmissionStore } from './admission-store.ts'
import { PgAgentCache, PgAgentStore } from './agents-store.ts'
import { PgBlobRecordStore } from './blobs-store.ts'
import { PgDiscoveryStore } from './discovery-store.ts'
import { mapPostgresError } from './errors.ts'
import { PgGroupCommit } from './group-commit.ts'
import { PgMessageStore } from './messages-store.ts'
import { PgRateStore } from './rate-store.ts'
import { PgReplayStore } from './replay-store.ts'
import { PgStateStore } from './state-store.ts'
import { PgStatsStore } from './stats-store.ts'
import { PgWebhookStore } from './webhooks-store.ts'
import { probeWithin } from '../../lib/probe.ts'
import { topLevelStore } from '../top-level.ts'

export interface PostgresStorageOptions {
  logger: Logger
  /** Run at close, before the pool ends (signals, connection registry). */
  onClose?: (() => Promise<void>)[]
  /** Connections of the pool; jobs reserve at most half of them (see `exclusive`). */
  poolSize?: number
  /** What is wrong with the signal link to the other instances, if anything. */
  linkProblem?: () => string | null
}

/**
 * The methods that run several statements or lock rows: at the top level each runs in a transaction of
 * its own. Every other method is one statement, atomic on the pool.
 */
const TX_WRITES: { [K in keyof Stores]?: readonly string[] } & { admission?: readonly string[] } = {
  agents: ['updateProfile', 'createCapped'],
  messages: ['insert', 'expireBatch'],
  blobs: ['claimContent', 'markContentDeleting'],
  webhooks: ['delete', 'claimDue', 'addFailure', 'removeFor'],
  admission: ['allow', 'revoke'],
}

type TxStores = Stores & { admission: PgAdmissionStore }

/** Attempts of a unit that PostgreSQL aborted to break a deadlock or a serialization conflict. */
const CONFLICT_ATTEMPTS = 3
const isConflict = (err: unknown) => {
  const state = (err as { errno?: unknown })?.errno
  return state === '40P01' || state === '40001'
}

/**
 * Runs `fn` again when PostgreSQL aborted it to break a deadlock (two units updating shared counters
 * in different orders): nothing of it was kept, so running it again is what a client retry would do.
 */
/**
 * The server ended the connection under the statement (terminated, shutting down after a crash): the
 * statement was aborted, not committed, and runs again on another connection rather than answering 503.
 * The pool finds a dead connection only by using it, and drops it then: after a restart or a mass kill
 * each of its connections may fail one statement, so a statement is tried up to the pool size + 1 times.
 */
function serverCutOff(err: unknown): boolean {
  const state = (err as { errno?: unknown })?.errno
  return state === '57P01' || state === '57P02'
}

/** The link broke (or the server ended it) while a transaction's statements ran, before its COMMIT was sent. */
function linkLost(err: unknown): boolean {
  const code = (err as { code?: unknown })?.code
  return serverCutOff(err) || code === 'ERR_POSTGRES_CONNECTION_CLOSED' || code === 'ECONNRESET' || code === 'EPIPE'
}

async function retryingConflicts<T>(fn: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn()
    } catch (err) {
      if (attempt >= CONFLICT_ATTEMPTS || !isConflict(err)) throw err
      await new Promise((r) => setTimeout(r, attempt * 5 + Math.random() * 10))
    }
  }
}

/**
 * Every method of `store` with driver errors mapped (a read PostgreSQL aborted to break a deadlock is
 * tried again); those named in `inTx` run in a transaction of their own.
 */
function topLevel<S extends object>(store: S, inTx: readonly string[], run: (fn: (tx: TxStores) => Promise<unknown>) => Promise<unknown>, pick: (tx: TxStores) => S, cutOffTries: number): S {
  return topLevelStore(store, inTx, run, pick, (method, args) => {
    const call = () => method(...args)
    const first = call()
    if (!(first instanceof Promise)) return first
    let tries = 1
    let cutOffs = 0
    const again = (err: unknown): Promise<unknown> => {
      if (serverCutOff(err) && ++cutOffs < cutOffTries) return (call() as Promise<unknown>).catch(again)
      return tries++ < CONFLICT_ATTEMPTS && isConflict(err) ? (call() as Promise<unknown>).catch(again) : Promise.reject(mapPostgresError(err))
    }
    return first.catch(again)
  })
}

/** Every async method of `target` with driver errors mapped. */
function mapped<S extends object>(target: S, cutOffTries: number): S {
  return topLevel(target, [], () => Promise.resolve(), () => target, cutOffTries)
}

export class PostgresStorage implements Storage {
  readonly kind = 'postgres'
  readonly agents
  readonly messages
  readonly acl
  readonly blobs
  readonly webhooks
  readonly state
  readonly admission
  readonly replay
  readonly rates
  readonly discovery
  readonly stats
  /** Operator listings (relay admin, /v1/admin), on the pool. */
  readonly adminQueries
  readonly cache = new PgAgentCache()
  private closed = false
  private probes = 0
  private readonly stat = { commits: 0, rollbacks: 0 }
  /** Jobs holding a reserved connection, at most `jobSlots`; the others wait their turn. */
  private jobsHolding = 0
  private readonly jobSlots: number
  /** Tries of a statement the server cut off (see serverCutOff). */
  private readonly cutOffTries: number
  private readonly jobQueue: (() => void)[] = []
  /** Grouped units (accepted messages): one transaction per group, see group-commit.ts. */
  private readonly groups: PgGroupCommit<TxStores>

  constructor(
    readonly sql: SQL,
    private readonly opts: PostgresStorageOptions,
  ) {
    this.jobSlots = Math.max(1, Math.floor((opts.poolSize ?? 10) / 2))
    this.cutOffTries = (opts.poolSize ?? 10) + 1
    const run = (fn: (tx: TxStores) => Promise<unknown>) => this.run(fn)
    const tries = this.cutOffTries
    this.agents = topLevel(new PgAgentStore(sql, this.cache, false), TX_WRITES.agents ?? [], run, (t) => t.agents, tries)
    this.messages = topLevel(new PgMessageStore(sql), TX_WRITES.messages ?? [], run, (t) => t.messages, tries)
    this.acl = topLevel(new PgAclStore(sql), [], run, (t) => t.acl, tries)
    this.blobs = topLevel(new PgBlobRecordStore(sql), TX_WRITES.blobs ?? [], run, (t) => t.blobs, tries)
    this.webhooks = topLevel(new PgWebhookStore(sql), TX_WRITES.webhooks ?? [], run, (t) => t.webhooks, tries)
    this.state = topLevel(new PgStateStore(sql), [], run, (t) => t.state, tries)
    this.admission = topLevel(new PgAdmissionStore(sql), TX_WRITES.admission ?? [], run, (t) => t.admission, tries)
    this.replay = mapped(new PgReplayStore(sql), tries)
    this.rates = mapped(new PgRateStore(sql), tries)
    this.discovery = mapped(new PgDiscoveryStore(sql), tries)
    this.stats = mapped(new PgStatsStore(sql), tries)
    this.adminQueries = mapped(new PgAdminQueries(sql), tries)
    // a group holds a connection from BEGIN to COMMIT: half the pool at most, the rest serves everything else
    this.groups = new PgGroupCommit<TxStores>((fn) => this.run(fn), { maxInFlight: Math.max(1, Math.floor((opts.poolSize ?? 10) / 2)), mapError: mapPostgresError })
  }

  transaction<T>(fn: (tx: Stores) => Promise<T>, opts?: UnitOptions): Promise<T> {
    return opts?.grouped ? this.groups.run(fn) : this.run(fn)
  }

  /** One PostgreSQL transaction; cached agent rows its writes touched are dropped again after the commit. */
  private async run<T>(fn: (tx: TxStores, db: SQL) => Promise<T>): Promise<T> {
    const afterCommit: (() => void)[] = []
    try {
      // a transaction whose connection was lost before its COMMIT was sent did nothing: it runs once more
      let bodyDone = false
      let lost = 0
      const attempt = (): Promise<T> => {
        bodyDone = false
        return retryingConflicts(() => this.begin(fn, afterCommit, () => (bodyDone = true))).catch((err) => {
          if (bodyDone || !linkLost(err) || ++lost >= this.cutOffTries) throw err
          for (const step of afterCommit) step()
          afterCommit.length = 0
          return attempt()
        })
      }
      const value = await attempt()
      this.stat.commits++
      for (const step of afterCommit) step()
      return value as T
    } catch (err) {
      this.stat.rollbacks++
      for (const step of afterCommit) step()
      throw mapPostgresError(err)
    }
  }

  private begin<T>(fn: (tx: TxStores, db: SQL) => Promise<T>, afterCommit: (() => void)[], done: () => void): Promise<T> {
    return this.sql.begin(async (db) => {
      const tx: TxStores = {
        agents: new PgAgentStore(db, this.cache, true, (step) => afterCommit.push(step)),
        messages: new PgMessageStore(db, true),
        acl: new PgAclStore(db),
        blobs: new PgBlobRecordStore(db),
        webhooks: new PgWebhookStore(db),
        state: new PgStateStore(db),
        admission: new PgAdmissionStore(db),
      }
      const value = await fn(tx, db as unknown as SQL)
      done()
      return value
    }) as Promise<T>
  }

  /**
   * Runs `fn` while holding a session advisory lock named after the job on a reserved connection: one
   * instance (and one run) at a time per job; `ran: false` when another holds it.
   */
  async exclusive<T>(job: string, fn: () => Promise<T>): Promise<{ ran: true; value: T } | { ran: false }> {
    // a job holds its reserved connection while its statements run on others: were every connection
    // reserved by jobs, their statements (and every request) would wait for good
    while (this.jobsHolding >= this.jobSlots) await new Promise<void>((r) => this.jobQueue.push(r))
    this.jobsHolding++
    try {
      return await this.exclusiveOn(job, fn)
    } finally {
      this.jobsHolding--
      this.jobQueue.shift()?.()
    }
  }

  private async exclusiveOn<T>(job: string, fn: () => Promise<T>): Promise<{ ran: true; value: T } | { ran: false }> {
    let conn: Awaited<ReturnType<SQL['reserve']>>
    try {
      conn = await this.sql.reserve()
    } catch (err) {
      throw mapPostgresError(err)
    }
    try {
      const [row] = await conn.unsafe(`SELECT pg_try_advisory_lock(hashtext($1)) AS ok`, [`relay.job:${job}`])
      if (!row?.ok) return { ran: false }
      try {
        return { ran: true, value: await fn() }
      } finally {
        await conn.unsafe(`SELECT pg_advisory_unlock(hashtext($1))`, [`relay.job:${job}`]).catch(() => conn.close().catch(() => {}))
      }
    } catch (err) {
      throw mapPostgresError(err)
    } finally {
      await conn.release().catch(() => {})
    }
  }

  async health() {
    const t0 = performance.now()
    try {
      await this.sql.unsafe('SELECT 1')
    } catch (err) {
      return { status: 'down' as const, engine: 'postgres', error: String((err as Error).message ?? err) }
    }
    const link = this.opts.linkProblem?.() ?? null
    return {
      status: link ? ('degraded' as const) : ('ok' as const),
      engine: 'postgres',
      signal_link: link ? 'down' : 'ok',
      ...(link ? { error: link } : {}),
      latency_ms: Math.round((performance.now() - t0) * 1000) / 1000,
      commits: this.stat.commits,
      rollbacks: this.stat.rollbacks,
      grouped: { ...this.groups.stats },
    }
  }

  /** Whether a write goes through now (answered within about a second). */
  async ready(): Promise<string | null> {
    // an instance that does not hear the others would not push their messages to its sockets
    const link = this.opts.linkProblem?.()
    if (link) return link
    return probeWithin(this.state.setNumber(`ready_probe`, ++this.probes), 1000, 'database does not answer', 'database not writable')
  }


  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    await this.groups.drain()
    for (const step of this.opts.onClose ?? []) {
      try {
        await step()
      } catch (err) {
        this.opts.logger.warn('closing the database link failed', { error: String(err) })
      }
    }
    await this.sql.close({ timeout: 5 })
  }
}
