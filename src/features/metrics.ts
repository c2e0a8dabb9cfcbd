/**
 * GET /metrics in the Prometheus text format (docs/protocol.md §13 operator interface): on the main port when
 * `metrics.enabled` (RELAY_METRICS=true), or on its own listener when `metrics.addr`
 * (RELAY_METRICS_ADDR) is set — then never on the main port. Off by default, so counts are not public.
 *
 * `createMetrics` builds the registry before anything else so that the HTTP pipeline and the scheduler
 * can report into it; `installMetrics` adds the figures read at scrape time and the endpoint.
 */
import { readdirSync } from 'node:fs'
import { Elysia } from 'elysia'
import { routeAuth } from '../http/route-auth.ts'
import type { Server } from 'bun'
import type { Logger } from '../lib/logger.ts'
import { METRICS } from '../metrics/catalog.ts'
import { CONTENT_TYPE, MetricsRegistry } from '../metrics/registry.ts'
import { defineFeature, type FeatureContext } from './feature.ts'
import type { RelayFigures } from '../services/ports.ts'
import { VERSION } from '../version.ts'

/** Methods outside this set are counted as OTHER, so odd requests cannot grow the label space. */
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'])

export function createMetrics(logger: Logger) {
  const registry = new MetricsRegistry((metric, err) => logger.warn('metric collection failed', { metric, error: String(err) }))
  const requests = registry.counter(METRICS.httpRequests)
  const latency = registry.histogram(METRICS.httpDuration)
  const jobRuns = registry.counter(METRICS.jobRuns)
  const jobDuration = registry.histogram({ ...METRICS.jobDuration, buckets: [0.001, 0.01, 0.1, 0.5, 1, 5, 30, 120] })
  return {
    registry,
    /** For createApp's onRequestDone. */
    onRequestDone(info: { method: string; route: string; status: number; durationMs: number }): void {
      const labels = { method: METHODS.has(info.method) ? info.method : 'OTHER', route: info.route, status: info.status }
      requests.inc(labels)
      latency.observe(info.durationMs / 1000, labels)
    },
    /** For the Scheduler's onRun. */
    onJobRun(job: string, durationMs: number, ok: boolean): void {
      jobRuns.inc({ job, outcome: ok ? 'ok' : 'error' })
      jobDuration.observe(durationMs / 1000, { job })
    },
  }
}

export function metricsFeature(ctx: FeatureContext) {
  const { metrics, config, clock, logger } = ctx
  const startedAtSeconds = clock.now() / 1000

  // process
  metrics.gauge({ name: 'relay_build_info', help: 'Always 1; the version label names the running relay.', labelNames: ['version'], collect: () => [{ labels: { version: VERSION }, value: 1 }] })
  metrics.gauge({ name: 'process_start_time_seconds', help: 'Start time of the process since the Unix epoch, in seconds.', collect: () => startedAtSeconds })
  metrics.gauge({ name: 'relay_uptime_seconds', help: 'Seconds since the relay started.', collect: () => Math.max(0, clock.now() / 1000 - startedAtSeconds) })
  metrics.gauge({ name: 'process_resident_memory_bytes', help: 'Resident memory size in bytes.', collect: () => process.memoryUsage.rss() })
  metrics.gauge({ name: 'process_heap_bytes', help: 'JavaScript heap in use, in bytes.', collect: () => process.memoryUsage().heapUsed })
  metrics.counter({ name: 'process_cpu_seconds_total', help: 'User and system CPU time spent, in seconds.', collect: () => {
    const u = process.cpuUsage()
    return (u.user + u.system) / 1e6
  } })
  metrics.gauge({ name: 'process_open_fds', help: 'Open file descriptors (Linux only).', collect: () => {
    try {
      return readdirSync('/proc/self/fd').length
    } catch {
      return []
    }
  } })

  // stored data, read at each scrape (so that every process writing the database is reflected) into a
  // snapshot the gauges report from
  let figures: RelayFigures | undefined
  const refresh = async () => {
    try {
      figures = await ctx.storage.stats.figures(clock.now())
    } catch (err) {
      logger.warn('reading figures for /metrics failed', { error: String(err) })
    }
  }
  const labelled = <T extends Record<string, number>>(values: T | undefined, label: string, skip: string[] = []) =>
    Object.entries(values ?? {})
      .filter(([k]) => !skip.includes(k))
      .map(([k, value]) => ({ labels: { [label]: k }, value: value as number }))
  metrics.gauge({ ...METRICS.agents, collect: () => labelled(figures?.agents, 'status', ['total']) })
  metrics.gauge({ ...METRICS.messages, collect: () => labelled(figures?.messages, 'status', ['total']) })
  metrics.gauge({ ...METRICS.blobRecords, collect: () => figures?.blobs.records ?? 0 })
  metrics.gauge({ ...METRICS.blobRecordBytes, collect: () => figures?.blobs.bytes ?? 0 })
  metrics.gauge({ ...METRICS.blobStoredBytes, collect: () => figures?.blobs.stored_bytes ?? 0 })
  metrics.gauge({ ...METRICS.webhooks, collect: () => [
    { labels: { state: 'enabled' }, value: figures?.webhooks.enabled ?? 0 },
    { labels: { state: 'disabled' }, value: figures?.webhooks.disabled ?? 0 },
  ] })
  metrics.gauge({ ...METRICS.webhookQueue, collect: () => figures?.webhooks.pending_deliveries ?? 0 })
  metrics.gauge({ ...METRICS.databaseBytes, collect: () => figures?.database.size_bytes ?? 0 })
  metrics.gauge({ ...METRICS.walBytes, collect: () => figures?.database.wal_bytes ?? 0 })

  const sent = metrics.counter(METRICS.messagesSent)

  const respond = async () => {
    await refresh()
    return new Response(metrics.expose(), { headers: { 'content-type': CONTENT_TYPE } })
  }
  const onMainPort = config.metrics.enabled && !config.metrics.addr
  const routes = new Elysia({ name: 'routes-metrics' }).use(routeAuth)
  if (onMainPort) routes.get('/metrics', respond, { auth: 'public', detail: { hide: true } })

  let server: Server<unknown> | undefined
  return defineFeature({
    name: 'metrics',
    routes,
    on: {
      messageCommitted: (_message, origin) => {
        if (origin === 'local') sent.inc()
      },
    },
    stop: () => server?.stop(true),
    api: {
      metrics,
      /** Starts the separate listener when `metrics.addr` is set; returns where /metrics is served. */
      async listen(mainUrl: string): Promise<string | null> {
        const addr = config.metrics.addr
        if (!addr) return onMainPort ? `${mainUrl}/metrics` : null
        server = Bun.serve({
          hostname: addr.host,
          port: addr.port,
          fetch: (req) => {
            const path = new URL(req.url).pathname
            if (path === '/metrics' && (req.method === 'GET' || req.method === 'HEAD')) return respond()
            return new Response('not found\n', { status: 404 })
          },
        })
        const host = addr.host.includes(':') ? `[${addr.host}]` : addr.host
        const url = `http://${host}:${server.port}/metrics`
        logger.debug('metrics listener started', { url })
        return url
      },
    },
  })
}
