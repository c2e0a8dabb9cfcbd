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
import { TrafficLog } from './lib/traffic.ts'
import { createMetrics, metricsFeature } from './features/metrics.ts'
import { messagesFeature } from './features/messages.ts'
import { blobsFeature } from './features/blobs.ts'
import { discoveryFeature } from './features/discovery.ts'
import { realtimeFeature } from './features/realtime.ts'
import { webhooksFeature } from './features/webhooks.ts'
import { agentsFeature } from './features/agents.ts'
import { adminFeature } from './features/admin.ts'
import { healthFeature } from './features/health.ts'
import { consoleFeature, docsFeature } from './features/pages.ts'
import type { DataPaths, Feature, FeatureContext } from './features/feature.ts'
import { assertEveryRouteDeclaresAuth, createApp, normalizeHost } from './http/app.ts'
import { errorResponse } from './http/errors.ts'
import { PreAuthBudget, clientAddress, parseAddressList, setClientAddress } from './http/preauth.ts'
import { Scheduler } from './jobs/scheduler.ts'
import { AgentsService } from './services/agents.ts'
import { Authenticator } from './services/authenticator.ts'
import { AdmissionService, admissionOptions } from './services/admission.ts'
import { HealthService } from './services/health.ts'
import type { BlobStore } from './services/ports.ts'
import { VerifyPool } from './auth/verify-pool.ts'
import { openStorage, openStorageAsync, type OpenedStorage } from './storage/open-storage.ts'
import { openBlobStore } from './blobs/open-blob-store.ts'
import { VERSION } from './version.ts'

export type { FeatureContext } from './features/feature.ts'

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

export function dataPaths(dataDir: string): DataPaths {
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
  const trustedProxies = config.trustProxy ? parseAddressList(config.trustProxy, 'RELAY_TRUST_PROXY') : null
  const preauth = new PreAuthBudget({ ...config.preauth, addressPerMin: config.rateLimits.addressPerMin }, clock)
  const agents = new AgentsService(storage, clock, signals)
  const metrics = createMetrics(logger)
  const scheduler = new Scheduler(clock, logger, metrics.onJobRun, (job, fn) => storage.exclusive(job, fn))
  const health = new HealthService(clock, VERSION, startedAt)

  /** What every feature module receives to build its repositories, services, routes and jobs. */
  const ctx: FeatureContext = {
    config,
    clock,
    logger,
    storage,
    signals,
    connections,
    paths,
    agents,
    admission,
    authenticator,
    preauth,
    fetch: deps.fetch ?? fetch,
    metrics: metrics.registry,
  }
  // answers per minute over the last hour, for the operator's chart
  const traffic = new TrafficLog()
  const onRequestDone = (info: Parameters<typeof metrics.onRequestDone>[0]) => {
    metrics.onRequestDone(info)
    traffic.record(info.status, clock.now())
  }
  // The features, in the order their routes, event listeners and stop steps run (see src/features/).
  const messages = messagesFeature(ctx)
  const installed = [
    healthFeature(ctx, { health, scheduler }),
    docsFeature(),
    agentsFeature(ctx),
    discoveryFeature(ctx),
    metricsFeature(ctx),
    messages,
    blobsFeature(ctx, { messages: messages.api, store: blobStore }),
    webhooksFeature(ctx),
    realtimeFeature(ctx, messages.api),
    adminFeature(ctx, { recent: recentLog, traffic }),
    consoleFeature(),
  ] as const
  type Installed = (typeof installed)[number]
  const features = Object.fromEntries(installed.map((f) => [f.name, f.api])) as { [F in Installed as F['name']]: F['api'] }

  let app = createApp({
    authenticator,
    preauth,
    limiter: messages.api.rateLimiter,
    clock,
    isOperator: (key) => admission.isAdmin(key),
    isKnownKey: async (key) => (await storage.agents.find(key))?.status === 'active',
    bodyTimeoutMs: config.preauth.bodyTimeoutMs,
    logger,
    onRequestDone,
  })
  for (const feature of installed as readonly Feature[]) {
    if (feature.routes) app = app.use(feature.routes)
    for (const job of feature.jobs ?? []) scheduler.add(job.name, job.intervalMs, job.run, { exclusive: job.exclusive })
    for (const [name, probe] of Object.entries(feature.probes ?? {})) health.component(name, probe)
    for (const [name, check] of Object.entries(feature.readiness ?? {})) health.readyCheck(name, check)
    const on = feature.on ?? {}
    if (on.messageCommitted) signals.onMessage(on.messageCommitted)
    if (on.messageInserting) messages.api.messages.onInsert(on.messageInserting)
    if (on.agentGone) signals.onAgentGone(on.agentGone)
    if (on.agentDeleting) agents.onDelete(on.agentDeleting)
    if (on.agentSuspending) agents.onSuspend(on.agentSuspending)
  }
  assertEveryRouteDeclaresAuth(app)

  /**
   * One entry point for every HTTP request: Bun.serve and in-process tests both call it. `address` is
   * the client address for per-address limits; in-process callers have none.
   */
  async function handle(incoming: Request, address: string | null = null): Promise<Response> {
    try {
      const request = normalizeHost(incoming)
      setClientAddress(request, address)
      return await app.handle(request)
    } catch (err) {
      logger.error('request escaped the pipeline', { error: String(err), stack: (err as Error)?.stack })
      return errorResponse(new RelayError('internal_error', 'Internal error'), newRequestId())
    }
  }

  let server: Server<any> | undefined

  async function start(): Promise<{ port: number; url: string; metricsUrl: string | null }> {
    server = Bun.serve({
      hostname: config.host,
      port: config.port,
      // every route caps its own body and answers 413 in the error envelope (JSON: 2 MiB, blobs: the
      // blob limit); Bun's own cap would answer a bare 413 first, so it is set out of the way
      maxRequestBodySize: Number.MAX_SAFE_INTEGER,
      // WebSocket handshakes on /v1/ws go to the socket hub; everything else to the HTTP pipeline
      fetch: (request, srv) => {
        const address = clientAddress(request, srv.requestIP(request)?.address, trustedProxies, exemptAddresses)
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
    for (const feature of installed as readonly Feature[]) await feature.start?.()
    const url = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${server.port}`
    const metricsUrl = await features.metrics.listen(url)
    return { port: server.port as number, url, metricsUrl }
  }

  let stopped = false
  /** Graceful stop: no new requests, in-flight ones finish, jobs end, WAL checkpointed, DB closed. */
  async function stop(): Promise<void> {
    if (stopped) return
    stopped = true
    await features.realtime.closeSockets()
    if (server) await server.stop(false)
    await scheduler.stop()
    for (const feature of installed as readonly Feature[]) await feature.stop?.()
    verifier.stop()
    await signals.close()
    await storage.close()
  }

  return {
    ...ctx,
    ctx,
    features,
    scheduler,
    health,
    services: { agents, authenticator, admin: features.admin.admin },
    recentLog,
    /** The SQLite writer connection when storage is SQLite: for tests and tools, never for rules. */
    sqlite,
    app,
    handle,
    start,
    stop,
    /** Reads operator changes made elsewhere now (tests; the admin feature does it every 250 ms). */
    watchSuspensions: features.admin.watchOperatorChanges,
  }
}

export type Relay = ReturnType<typeof createRelay>
