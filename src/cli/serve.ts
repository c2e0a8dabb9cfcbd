import { loadConfig } from '../config/load.ts'
import { createLogger } from '../lib/logger.ts'
import { formatBytes } from '../lib/units.ts'
import { createRelay } from '../relay.ts'
import { VERSION } from '../version.ts'

export const SERVE_FLAGS = ['port', 'host', 'data-dir', 'config', 'log-level']

/** `relay serve`: start, log one start-up line, stop gracefully on SIGTERM/SIGINT. */
export async function serve(flags: Record<string, string>): Promise<void> {
  const config = await loadConfig({ flags })
  const logger = createLogger(config.logLevel)
  const relay = createRelay(config, { logger })
  const { url, port, metricsUrl } = await relay.start()
  logger.info('relay started', {
    version: VERSION,
    address: url,
    port,
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
