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
import { createMetrics, installMetrics } from './features/metrics.ts'
import type { MetricsRegistry } from './metrics/registry.ts'
import { installMessages } from './features/messages.ts'
import { installBlobs } from './features/blobs.ts'
import { createApp } from './http/app.ts'
import { errorResponse } from './http/errors.ts'
import { stateOf } from './http/request-state.ts'
import { pathOnly, pathStart } from './lib/url.ts'
import { agentRoutes } from './http/routes/agents.ts'
import { installDiscovery } from './features/discovery.ts'
import { installRealtime } from './features/realtime.ts'
import { docsRoutes } from './http/routes/docs.ts'
import { healthRoutes } from './http/routes/health.ts'
import { Scheduler } from './jobs/scheduler.ts'
import { AgentsService } from './services/agents.ts'
import { Authenticator } from './services/authenticator.ts'
import { RelayEvents } from './services/events.ts'
import { HealthService } from './services/health.ts'
import { deleteAgentData } from './storage/agent-cleanup.ts'
import { AgentsRepo } from './storage/agents-repo.ts'
import { Checkpointer } from './storage/checkpointer.ts'
import { openDatabase, type Db } from './storage/db.ts'
import { ReplayCache } from './auth/replay-cache.ts'
import { VerifyPool } from './auth/verify-pool.ts'
import { GroupCommit } from './storage/group-commit.ts'
import { ReplayRepo } from './storage/replay-repo.ts'
import { VERSION } from './version.ts'

export interface FeatureContext {
  config: Config
  clock: Clock
  logger: Logger
  db: Db
  paths: ReturnType<typeof dataPaths>
  events: RelayEvents
  scheduler: Scheduler
  health: HealthService
  agents: AgentsService
  authenticator: Authenticator
  /** Group commit for writes that many requests can share (replay cache, activity). */
  writes: GroupCommit
  fetch: typeof fetch
  /** Counters, gauges and histograms for GET /metrics; names in src/metrics/catalog.ts. */
  metrics: MetricsRegistry
  /** Steps run in order by a graceful stop, after HTTP stops and jobs end, before the DB closes. */
  onStop: (() => void | Promise<void>)[]
}

export interface RelayDeps {
  clock?: Clock
  logger?: Logger
  /** Outbound HTTP for webhooks; tests may record or redirect it. */
  fetch?: typeof fetch
}

/** How often a running relay looks for operator suspensions made by `relay admin` (SPEC §13: within 1 s). */
const SUSPENSION_POLL_MS = 250
/** Replay entries removed per prune run, so one run never holds the database for long. */
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

export function createRelay(config: Config, deps: RelayDeps = {}) {
  const clock = deps.clock ?? systemClock
  const logger = deps.logger ?? createLogger(config.logLevel)
  const startedAt = performance.now()
  const paths = prepareDataDir(config.dataDir)
  const db: Db = openDatabase(paths.database)
  const checkpointer = new Checkpointer(db.$client, paths.database, logger).start()
  const events = new RelayEvents((err) => logger.error('event listener failed', { error: String(err) }))

  const agentsRepo = new AgentsRepo(db)
  const replayRepo = new ReplayRepo(db)
  const writes = new GroupCommit(db.$client, (err) => logger.error('background write failed', { error: String(err) }))
  const replayCache = new ReplayCache(replayRepo, writes, clock.now())
  const verifier = new VerifyPool(config.verifyOnWorker, (error) =>
    logger.warn('signature worker failed; verifying on the main thread', { error }),
  )
  const authenticator = new Authenticator(agentsRepo, replayCache, verifier, writes, clock, config.timestampToleranceMs)
  const agents = new AgentsService(db, agentsRepo, clock, events)
  agents.onDelete((key, now) => deleteAgentData(db.$client, key, now))
  events.on('agentGone', ({ publicKey }) => authenticator.forget(publicKey))

  const metrics = createMetrics(logger)
  const scheduler = new Scheduler(clock, logger, metrics.onJobRun)
  scheduler.add('prune-replay-cache', config.sweepIntervalMs, (now) => ({ removed: replayCache.prune(now, REPLAY_PRUNE_BATCH) }))

  // operator changes written by another process (relay admin) reach the running relay here
  let changesSeen = clock.now()
  const watchSuspensions = () => {
    for (const row of agentsRepo.changedSince(changesSeen)) {
      changesSeen = Math.max(changesSeen, row.updatedAt)
      agentsRepo.invalidate(row.publicKey)
      if (row.status === 'suspended') events.emit('agentGone', { publicKey: row.publicKey, reason: 'suspended' })
    }
  }

  const health = new HealthService(clock, VERSION, startedAt)
  health.component('database', () => {
    const t0 = performance.now()
    db.$client.query('SELECT 1').get()
    return { status: 'ok', latency_ms: Math.round((performance.now() - t0) * 1000) / 1000, checkpoints: checkpointer.report() }
  })
  health.component('jobs', () => ({ status: scheduler.hasFailures() ? 'degraded' : 'ok', ...scheduler.report() }))
  health.readyCheck('database', () => {
    db.$client.run(`INSERT INTO relay_state (key, value) VALUES ('ready_probe', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`, [String(clock.now())])
    return null
  })
  health.readyCheck('blob_store', () => {
    for (const dir of [paths.tmp, paths.blobs]) {
      const probe = join(dir, `.ready-${process.pid}`)
      try {
        writeFileSync(probe, 'ok')
        rmSync(probe)
      } catch (err) {
        return `blob directory not writable: ${(err as Error).message}`
      }
    }
    return null
  })

  /** What every feature module receives to build its repositories, services, routes and jobs. */
  const ctx: FeatureContext = {
    config,
    clock,
    logger,
    db,
    paths,
    events,
    scheduler,
    health,
    agents,
    authenticator,
    writes,
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
    blobs: installBlobs(ctx, { messages: messages.messages }),
    realtime: installRealtime(ctx, messages),
  }

  const app = createApp({ config, clock, logger, authenticator, onRequestDone: metrics.onRequestDone })
    .use(healthRoutes(health))
    .use(docsRoutes(VERSION))
    .use(agentRoutes(agents))
    .use(features.discovery.routes)
    .use(features.metrics.routes)
    .use(features.messages.routes)
    .use(features.blobs.routes)
    .use(features.realtime.routes)

  /** One entry point for every HTTP request: Bun.serve and in-process tests both call it. */
  async function handle(incoming: Request): Promise<Response> {
    try {
      const request = normalizeHost(incoming)
      // HEAD exists only for blobs (SPEC §6); elsewhere the framework would run the GET handler
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
          // the signature could not be recorded: the request may not count as answered
          logger.error('replay cache write failed', { error: String(err) })
          return errorResponse(new RelayError('service_unavailable', 'Storage is unavailable; retry later'), stateOf(request)?.requestId ?? newRequestId())
        }
      }
      return response
    } catch (err) {
      logger.error('request escaped the pipeline', { error: String(err), stack: (err as Error)?.stack })
      return errorResponse(new RelayError('internal_error', 'Internal error'), newRequestId())
    }
  }

  /**
   * The router finds the path by searching for "/" from the 12th character of the URL, which a very
   * short Host header (`Host: x`) defeats; such requests get a placeholder host. The path and query,
   * which the signature covers, are unchanged.
   */
  function normalizeHost(request: Request): Request {
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
      // every route caps its own body and answers 413 in the SPEC envelope (JSON: 2 MiB, blobs: the
      // blob limit); Bun's own cap would answer a bare 413 first, so it is set out of the way
      maxRequestBodySize: Number.MAX_SAFE_INTEGER,
      // WebSocket handshakes on /v1/ws go to the socket hub; everything else to the HTTP pipeline
      fetch: (request, srv) => {
        const ws = features.realtime.upgrade(request, srv)
        return ws === null ? handle(request) : ws
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
    writes.flush()
    await checkpointer.stop()
    verifier.stop()
    try {
      db.$client.run('PRAGMA wal_checkpoint(TRUNCATE)')
    } catch (err) {
      logger.warn('WAL checkpoint failed', { error: String(err) })
    }
    db.$client.close()
  }

  return {
    ...ctx,
    ctx,
    features,
    services: { agents, authenticator },
    repos: { agents: agentsRepo, replay: replayRepo },
    app,
    handle,
    start,
    stop,
    watchSuspensions,
  }
}

export type Relay = ReturnType<typeof createRelay>
