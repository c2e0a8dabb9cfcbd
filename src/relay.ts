/**
 * The composition root: builds every part of a relay from a Config and returns handles to serve,
 * test and stop it. Nothing here holds a rule; it only wires.
 */
import { accessSync, constants, mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Server } from 'bun'
import type { Config } from './config/config.ts'
import { RelayError } from './errors.ts'
import { systemClock, type Clock } from './lib/clock.ts'
import { newRequestId } from './lib/ids.ts'
import { createLogger, type Logger } from './lib/logger.ts'
import { RecentLog, recordingLogger } from './lib/recent-log.ts'
import { createMetrics, installMetrics } from './features/metrics.ts'
import type { MetricsRegistry } from './metrics/registry.ts'
import { installMessages } from './features/messages.ts'
import { installBlobs } from './features/blobs.ts'
import { createApp } from './http/app.ts'
import { requestGuards } from './http/request-guards.ts'
import { errorResponse } from './http/errors.ts'
import { stateOf } from './http/request-state.ts'
import { PreAuthBudget, clientAddress, parseAddressList, setClientAddress } from './http/preauth.ts'
import { pathOnly, pathStart } from './lib/url.ts'
import { agentRoutes } from './http/routes/agents.ts'
import { installDiscovery } from './features/discovery.ts'
import { installRealtime } from './features/realtime.ts'
import { docsRoutes } from './http/routes/docs.ts'
import { healthRoutes } from './http/routes/health.ts'
import { adminRoutes } from './http/routes/admin.ts'
import { consoleRoutes } from './http/routes/console.ts'
import { AdminService } from './services/admin.ts'
import { Scheduler } from './jobs/scheduler.ts'
import { AgentsService } from './services/agents.ts'
import { Authenticator } from './services/authenticator.ts'
import { AdmissionService, admissionOptions } from './services/admission.ts'
import { HealthService } from './services/health.ts'
import type { BlobStore, ConnectionRegistry, Signals, Storage } from './services/ports.ts'
import { VerifyPool } from './auth/verify-pool.ts'
import { openStorage, openStorageAsync, type OpenedStorage } from './storage/open-storage.ts'
import { openBlobStore } from './blobs/open-blob-store.ts'
import { VERSION } from './version.ts'

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
  paths: ReturnType<typeof dataPaths>
  scheduler: Scheduler
  health: HealthService
  agents: AgentsService
  /** Operator admission: allowlist, agent cap, new-agent rate (relay admin allow/revoke act on it). */
  admission: AdmissionService
  authenticator: Authenticator
  /** What unauthenticated requests and sockets may cost: rate per address, memory held. */
  preauth: PreAuthBudget
  fetch: typeof fetch
  /** Counters, gauges and histograms for GET /metrics; names in src/metrics/catalog.ts. */
  metrics: MetricsRegistry
  /** Steps run in order by a graceful stop, after HTTP stops and jobs end, before storage closes. */
  onStop: (() => void | Promise<void>)[]
}

export interface RelayDeps {
  clock?: Clock
  logger?: Logger
  /** Outbound HTTP for webhooks; tests may record or redirect it. */
  fetch?: typeof fetch
  /** Storage opened beforehand (openRelay does it; needed for PostgreSQL); else the SQLite file. */
  opened?: OpenedStorage
  /** The blob store opened beforehand (openRelay checks it); else the one the config names. */
  blobStore?: BlobStore
}

/**
 * Opens what a relay needs that takes a round trip — the PostgreSQL database (migrated), the blob
 * bucket (checked) — then builds the relay. Each fails with one line naming what is unreachable.
 */
export async function openRelay(config: Config, deps: RelayDeps = {}): Promise<Relay> {
  const clock = deps.clock ?? systemClock
  const logger = deps.logger ?? createLogger(config.logLevel)
  const paths = prepareDataDir(config.dataDir)
  const blobStore = deps.blobStore ?? openBlobStore(config, paths, clock)
  await blobStore.check()
  const opened = deps.opened ?? (await openStorageAsync(config, paths, logger, clock))
  return createRelay(config, { ...deps, clock, logger, opened, blobStore })
}

/** How often a running relay looks for operator suspensions made by `relay admin` (docs/protocol.md §13: within 1 s). */
const SUSPENSION_POLL_MS = 250
/** Replay entries one statement of a prune run deletes (a run deletes every expired one), so no statement holds the database for long. */
const REPLAY_PRUNE_BATCH = 5000

export function dataPaths(dataDir: string) {
  return { dataDir, database: join(dataDir, 'relay.db'), blobs: join(dataDir, 'blobs'), tmp: join(dataDir, 'tmp') }
}

/** Creates the data directory tree; throws a one-line Error when it cannot be used. */
export function prepareDataDir(dataDir: string) {
  const paths = dataPaths(dataDir)
  try {
    for (const dir of [paths.dataDir, paths.blobs, paths.tmp]) mkdirSync(dir, { recursive: true, mode: 0o700 })
    accessSync(paths.dataDir, constants.W_OK)
  } catch (err) {
    throw new Error(`data directory ${dataDir} is not usable: ${(err as Error).message}`)
  }
  return paths
}

/** Warnings and errors kept for GET /v1/admin/errors. */
const RECENT_LOG_LINES = 200

export function createRelay(config: Config, deps: RelayDeps = {}) {
  const clock = deps.clock ?? systemClock
  // the operator API shows the latest warnings and errors of this relay
  const recentLog = new RecentLog(RECENT_LOG_LINES)
  const logger = recordingLogger(deps.logger ?? createLogger(config.logLevel), recentLog, clock)
  const startedAt = performance.now()
  const paths = prepareDataDir(config.dataDir)
  const { storage, signals, connections, sqlite } = deps.opened ?? openStorage(config, paths, logger, clock)
  const blobStore = deps.blobStore ?? openBlobStore(config, paths, clock)

  const verifier = new VerifyPool(config.verifyOnWorker, (error) =>
    logger.warn('signature worker failed; verifying on the main thread', { error }),
  )
  const admission = new AdmissionService(storage, clock, admissionOptions(config))
  const authenticator = new Authenticator({
    admission,
    agents: storage.agents,
    replay: storage.replay,
    verifier,
    clock,
    toleranceMs: config.timestampToleranceMs,
    onBackgroundError: (err) => logger.warn('last-active update failed', { error: String(err) }),
  })
  const exemptAddresses = parseAddressList(config.rateLimits.addressExempt)
  const preauth = new PreAuthBudget({ ...config.preauth, addressPerMin: config.rateLimits.addressPerMin }, clock)
  const agents = new AgentsService(storage, clock, signals)
  signals.onAgentGone((publicKey) => authenticator.forget(publicKey))

  const metrics = createMetrics(logger)
  const scheduler = new Scheduler(clock, logger, metrics.onJobRun, (job, fn) => storage.exclusive(job, fn))
  scheduler.add('prune-replay-cache', config.sweepIntervalMs, async (now) => ({ removed: await storage.replay.prune(now, REPLAY_PRUNE_BATCH) }), { exclusive: true })

  // operator changes written by another process (relay admin) or instance reach this relay here
  let changesSeen = clock.now()
  let watching = false
  const watchSuspensions = async () => {
    if (watching) return
    watching = true
    try {
      await admission.refresh()
      for (const row of await storage.agents.changedSince(changesSeen)) {
        changesSeen = Math.max(changesSeen, row.updatedAt)
        storage.agents.invalidate(row.publicKey)
        if (row.status === 'suspended') signals.agentGone(row.publicKey, 'suspended')
      }
    } catch (err) {
      logger.warn('reading operator changes failed', { error: String(err) })
    } finally {
      watching = false
    }
  }

  const health = new HealthService(clock, VERSION, startedAt)
  health.component('database', () => storage.health())
  health.component('jobs', () => ({ status: scheduler.hasFailures() ? 'degraded' : 'ok', ...scheduler.report() }))
  health.component('preauth', () => ({ status: 'ok', held_bytes: preauth.heldBytes, limit_bytes: config.preauth.memoryBytes }))
  health.readyCheck('database', () => storage.ready())
  health.readyCheck('blob_store', () => blobStore.ready())

  /** What every feature module receives to build its repositories, services, routes and jobs. */
  const ctx: FeatureContext = {
    config,
    clock,
    logger,
    storage,
    signals,
    connections,
    paths,
    scheduler,
    health,
    agents,
    admission,
    authenticator,
    preauth,
    fetch: deps.fetch ?? fetch,
    metrics: metrics.registry,
    onStop: [],
  }
  // Feature modules, one line each (see src/features/); real-time delivery hooks into messages.
  const messages = installMessages(ctx)
  const features = {
    discovery: installDiscovery(ctx),
    metrics: installMetrics(ctx),
    messages,
    blobs: installBlobs(ctx, { messages: messages.messages, store: blobStore }),
    realtime: installRealtime(ctx, messages),
  }

  const admin = new AdminService({ storage, clock, agents, admission, recent: recentLog })
  const app = createApp({ config, clock, logger, authenticator, preauth, onRequestDone: metrics.onRequestDone })
    .use(requestGuards({ limiter: messages.rateLimiter, clock }))
    .use(healthRoutes(health))
    .use(docsRoutes(VERSION))
    .use(agentRoutes(agents))
    .use(features.discovery.routes)
    .use(features.metrics.routes)
    .use(features.messages.routes)
    .use(features.blobs.routes)
    .use(features.realtime.routes)
    .use(adminRoutes(admin, (key) => admission.isAdmin(key)))
    .use(consoleRoutes())

  /**
   * One entry point for every HTTP request: Bun.serve and in-process tests both call it. `address` is
   * the client address for per-address limits; in-process callers have none.
   */
  async function handle(incoming: Request, address: string | null = null): Promise<Response> {
    let request = incoming
    try {
      request = normalizeHost(incoming)
      setClientAddress(request, address)
      // HEAD exists only for blobs (docs/protocol.md §6); elsewhere the framework would run the GET handler
      // (a HEAD /v1/messages would mark messages delivered), so it is a wrong method: 404
      if (request.method === 'HEAD' && !pathOnly(request.url).startsWith('/v1/blobs/')) {
        return errorResponse(new RelayError('not_found', 'No such route'), newRequestId())
      }
      const response = await app.handle(request)
      const replayCommitted = stateOf(request)?.replayCommitted
      if (replayCommitted) {
        try {
          await replayCommitted
        } catch (err) {
          // the signature could not be recorded: the request may not count as answered (a locked database
          // or a full disk says so in its own error; anything else is storage failing)
          const known = err instanceof RelayError && (err.status === 503 || err.status === 507)
          if (!known) logger.error('replay cache write failed', { error: String(err) })
          const answer = known ? (err as RelayError) : new RelayError('service_unavailable', 'Storage is unavailable; retry later', null, { 'Retry-After': '5' })
          return errorResponse(answer, stateOf(request)?.requestId ?? newRequestId())
        }
      }
      return response
    } catch (err) {
      logger.error('request escaped the pipeline', { error: String(err), stack: (err as Error)?.stack })
      return errorResponse(new RelayError('internal_error', 'Internal error'), newRequestId())
    } finally {
      // whatever ended the request, its body no longer counts as unauthenticated
      stateOf(request)?.hold?.release()
    }
  }

  /**
   * The router finds the path by searching for "/" from the 12th character of the URL, which a very
   * short Host header (`Host: x`) defeats; such requests get a placeholder host. The path and query,
   * which the signature covers, are unchanged.
   */
  function normalizeHost(request: Request): Request {
    // HTTP/1.0 without a Host header (HAProxy's default health check): the runtime gives the bare path
    if (request.url.startsWith('/')) return new Request('http://relay.invalid' + request.url, request)
    const slash = pathStart(request.url)
    if (slash < 0 || slash >= 11) return request
    return new Request('http://relay.invalid' + request.url.slice(slash), request)
  }

  let server: Server<any> | undefined
  let suspensionTimer: ReturnType<typeof setInterval> | undefined

  async function start(): Promise<{ port: number; url: string; metricsUrl: string | null }> {
    server = Bun.serve({
      hostname: config.host,
      port: config.port,
      // every route caps its own body and answers 413 in the error envelope (JSON: 2 MiB, blobs: the
      // blob limit); Bun's own cap would answer a bare 413 first, so it is set out of the way
      maxRequestBodySize: Number.MAX_SAFE_INTEGER,
      // WebSocket handshakes on /v1/ws go to the socket hub; everything else to the HTTP pipeline
      fetch: (request, srv) => {
        const address = clientAddress(request, srv.requestIP(request)?.address, config.trustProxy, exemptAddresses)
        setClientAddress(request, address)
        const ws = features.realtime.upgrade(request, srv)
        return ws === null ? handle(request, address) : ws
      },
      websocket: features.realtime.websocket,
      error: (err) => {
        logger.error('server error', { error: String(err) })
        return errorResponse(new RelayError('internal_error', 'Internal error'), newRequestId())
      },
    })
    scheduler.start()
    suspensionTimer = setInterval(watchSuspensions, SUSPENSION_POLL_MS)
    const url = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${server.port}`
    const metricsUrl = await features.metrics.listen(url)
    return { port: server.port as number, url, metricsUrl }
  }

  let stopped = false
  /** Graceful stop: no new requests, in-flight ones finish, jobs end, WAL checkpointed, DB closed. */
  async function stop(): Promise<void> {
    if (stopped) return
    stopped = true
    clearInterval(suspensionTimer)
    await features.realtime.closeSockets()
    if (server) await server.stop(false)
    await scheduler.stop()
    for (const step of ctx.onStop) await step()
    verifier.stop()
    await signals.close()
    await storage.close()
  }

  return {
    ...ctx,
    ctx,
    features,
    services: { agents, authenticator, admin },
    recentLog,
    /** The SQLite writer connection when storage is SQLite: for tests and tools, never for rules. */
    sqlite,
    app,
    handle,
    start,
    stop,
    watchSuspensions,
  }
}

export type Relay = ReturnType<typeof createRelay>
