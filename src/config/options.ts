/**
 * Every configuration option in one table (SPEC §13): its key in relay.config.ts, its environment
 * variable, its command-line flag, its default and the reason for that default. The loader, `--help`
 * and the README's configuration reference are all driven by this table.
 */

export type OptionKind = 'string' | 'port' | 'int' | 'duration' | 'size' | 'bool' | 'level' | 'durations' | 'addr'

export interface OptionSpec {
  /** Dotted key in relay.config.ts, e.g. `webhooks.allowPrivateTargets`. */
  key: string
  env: string
  flag?: string
  kind: OptionKind
  default: string | number | boolean | null
  min?: number
  max?: number
  why: string
}

export const OPTIONS: OptionSpec[] = [
  { key: 'host', env: 'RELAY_HOST', flag: '--host', kind: 'string', default: '127.0.0.1', why: 'listen on loopback only until the operator puts a TLS proxy in front or opts in to 0.0.0.0' },
  { key: 'port', env: 'RELAY_PORT', flag: '--port', kind: 'port', default: 8080, why: 'a common unprivileged HTTP port; 0 picks a free port' },
  { key: 'dataDir', env: 'RELAY_DATA_DIR', flag: '--data-dir', kind: 'string', default: './data', why: 'database, blobs and key material in one directory that is easy to back up; created on first start' },
  { key: 'logLevel', env: 'RELAY_LOG_LEVEL', flag: '--log-level', kind: 'level', default: 'info', why: 'one line per request and per job run is enough to operate; debug adds detail' },
  { key: 'verifyOnWorker', env: 'RELAY_VERIFY_ON_WORKER', kind: 'bool', default: true, why: 'check request signatures on a worker thread so the event loop keeps serving; false verifies inline (one thread)' },
  { key: 'timestampTolerance', env: 'RELAY_TIMESTAMP_TOLERANCE', kind: 'duration', default: '300s', min: 1000, max: 86_400_000, why: 'SPEC §1.2: ±5 min absorbs ordinary clock drift while keeping the replay cache small' },
  { key: 'rateLimits.sendPerMin', env: 'RELAY_RATE_SEND_PER_MIN', kind: 'int', default: 30, min: 0, max: 10_000_000, why: 'SPEC §7: POST /v1/messages plus WebSocket send per agent per sliding minute (0 = unlimited)' },
  { key: 'rateLimits.pollPerMin', env: 'RELAY_RATE_POLL_PER_MIN', kind: 'int', default: 120, min: 0, max: 10_000_000, why: 'SPEC §7: GET /v1/messages per agent per sliding minute (0 = unlimited)' },
  { key: 'blobs.maxSize', env: 'RELAY_BLOB_MAX_SIZE', kind: 'size', default: '100MiB', min: 1, max: 16 * 1024 ** 3, why: 'SPEC §6: largest single blob' },
  { key: 'blobs.quota', env: 'RELAY_BLOB_QUOTA', kind: 'size', default: '1GiB', min: 0, max: 2 ** 50, why: 'SPEC §6: stored blob bytes per agent, so one agent cannot fill the disk' },
  { key: 'blobs.unattachedTtl', env: 'RELAY_BLOB_UNATTACHED_TTL', kind: 'duration', default: '24h', min: 1000, why: 'SPEC §6: time to attach an uploaded blob to a message before it is collected' },
  { key: 'messages.expiredRetention', env: 'RELAY_EXPIRED_RETENTION', kind: 'duration', default: '7d', min: 0, why: 'SPEC §4.6: how long an expired envelope answers status queries' },
  { key: 'ws.maxConnections', env: 'RELAY_WS_MAX_CONNECTIONS', kind: 'int', default: 5, min: 1, max: 1000, why: 'SPEC §8: WebSockets per agent; enough for a few replicas of one agent' },
  { key: 'ws.pingInterval', env: 'RELAY_WS_PING_INTERVAL', kind: 'duration', default: '30s', min: 1000, why: 'SPEC §8: keepalive pings; a connection that misses one is closed' },
  { key: 'ws.authTimeout', env: 'RELAY_WS_AUTH_TIMEOUT', kind: 'duration', default: '10s', min: 100, max: 300_000, why: 'SPEC §8: time a new WebSocket has to send its auth frame before it is closed with 4008' },
  { key: 'webhooks.retryDelays', env: 'RELAY_WEBHOOK_RETRY_DELAYS', kind: 'durations', default: '1m,5m,15m,30m,1h,2h', why: 'SPEC §9: delays before attempts 2…7 (±10 % jitter)' },
  { key: 'webhooks.timeout', env: 'RELAY_WEBHOOK_TIMEOUT', kind: 'duration', default: '10s', min: 100, max: 300_000, why: 'SPEC §9: answer time per attempt' },
  { key: 'webhooks.disableAfter', env: 'RELAY_WEBHOOK_DISABLE_AFTER', kind: 'int', default: 3, min: 1, max: 1000, why: 'SPEC §9: consecutive failed messages that disable a webhook' },
  { key: 'webhooks.allowPrivateTargets', env: 'RELAY_WEBHOOK_ALLOW_PRIVATE_TARGETS', kind: 'bool', default: false, why: 'SPEC §9: refuse loopback/private targets so agents cannot probe the inside network; home labs turn it on' },
  { key: 'webhooks.concurrency', env: 'RELAY_WEBHOOK_CONCURRENCY', kind: 'int', default: 32, min: 1, max: 1024, why: 'attempts in flight at once, so a slow receiver cannot starve the others' },
  { key: 'sweepInterval', env: 'RELAY_SWEEP_INTERVAL', kind: 'duration', default: '30s', min: 100, max: 86_400_000, why: 'how often expiry and cleanup jobs run; reads filter by expiry anyway' },
  { key: 'metrics.enabled', env: 'RELAY_METRICS', kind: 'bool', default: false, why: 'GET /metrics (Prometheus) on the main port; off so counts are not public by default' },
  { key: 'metrics.addr', env: 'RELAY_METRICS_ADDR', kind: 'addr', default: null, why: 'serve /metrics on a separate host:port (e.g. 127.0.0.1:9090) instead of the main port' },
]
