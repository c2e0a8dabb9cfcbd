import { createServer } from 'node:net'
import { OPTIONS } from '../config/options.ts'
import { loadConfig } from '../config/load.ts'
import { createLogger, quietRepeats } from '../lib/logger.ts'
import { formatBytes } from '../lib/units.ts'
import { openRelay } from '../relay.ts'
import { VERSION } from '../version.ts'
import { DEFAULT_RELAY_URL } from './client-cli.ts'

/** `--config`, and one flag per option of the table (docs/protocol.md §13: every option has its flag). */
export const SERVE_FLAGS = ['config', ...OPTIONS.map((o) => o.flag.slice(2))]
export const SERVE_BOOLEANS = ['require-encryption']

/** The URL a client on this machine uses: a wildcard listen address is reached over loopback. */
export function localUrl(host: string, port: number): string {
  const h = host === '0.0.0.0' || host === '' ? '127.0.0.1' : host === '::' ? '::1' : host
  return `http://${h.includes(':') ? `[${h}]` : h}:${port}`
}

/**
 * Fails when host:port cannot be bound, before anything is written: a relay started twice must not
 * create a data directory or database first. (Another process may still take the port before the
 * relay binds it; the server's own error covers that.)
 */
export async function assertPortFree(host: string, port: number, what: string, setting: string): Promise<void> {
  if (port === 0) return
  await new Promise<void>((resolve, reject) => {
    const probe = createServer()
    probe.once('error', (err: NodeJS.ErrnoException) => {
      const why = err.code === 'EADDRINUSE' ? 'is in use (is another relay running?)' : `cannot be used (${err.code ?? err.message})`
      reject(new Error(`${what} ${host.includes(':') ? `[${host}]` : host}:${port} ${why}; choose another with ${setting}`))
    })
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve()))
  })
}

/** `relay serve`: start, log one start-up line, stop gracefully on SIGTERM/SIGINT. */
export async function serve(flags: Record<string, string>): Promise<void> {
  const config = await loadConfig({ flags })
  await assertPortFree(config.host, config.port, 'the address', '--port or RELAY_PORT')
  if (config.metrics.addr) await assertPortFree(config.metrics.addr.host, config.metrics.addr.port, 'the metrics address', 'RELAY_METRICS_ADDR')
  // a failing dependency (the database down) is reported, not repeated by every timer and request
  const logger = quietRepeats(createLogger(config.logLevel))
  const relay = await openRelay(config, { logger })
  const { url, port, metricsUrl } = await relay.start()
  const relayUrl = localUrl(config.host, port)
  logger.info('relay started', {
    version: VERSION,
    address: url,
    port,
    // what agent commands on this machine need; they default to http://127.0.0.1:8080
    relay_url: relayUrl,
    ...(relayUrl === DEFAULT_RELAY_URL ? {} : { hint: `agent commands: export RELAY_URL=${relayUrl} (or pass --relay ${relayUrl})` }),
    data_dir: config.dataDir,
    metrics: metricsUrl,
    limits: {
      timestamp_tolerance_ms: config.timestampToleranceMs,
      send_per_min: config.rateLimits.sendPerMin,
      poll_per_min: config.rateLimits.pollPerMin,
      blob_max_size: formatBytes(config.blobs.maxSizeBytes),
      blob_quota: formatBytes(config.blobs.quotaBytes),
      ws_max_connections: config.ws.maxConnections,
      webhook_private_targets: config.webhooks.allowPrivateTargets,
    },
  })
  let stopping = false
  const shutdown = async (signal: string) => {
    if (stopping) return
    stopping = true
    logger.info('relay stopping', { signal })
    const force = setTimeout(() => {
      logger.error('graceful stop took too long; exiting')
      process.exit(1)
    }, 15_000)
    try {
      await relay.stop()
      logger.info('relay stopped')
      clearTimeout(force)
      process.exit(0)
    } catch (err) {
      logger.error('stop failed', { error: String(err) })
      process.exit(1)
    }
  }
  process.on('SIGTERM', () => void shutdown('SIGTERM'))
  process.on('SIGINT', () => void shutdown('SIGINT'))
}
