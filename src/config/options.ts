/**
 * Every configuration option in one table (docs/protocol.md §13): its key in relay.config.ts, its environment
 * variable, its command-line flag, its default and the reason for that default. The loader, `--help`
 * and the README's configuration reference are all driven by this table.
 */

export type OptionKind = 'string' | 'text' | 'choice' | 'port' | 'int' | 'duration' | 'size' | 'bool' | 'level' | 'durations' | 'addr' | 'keys'

interface OptionRow {
  /** Dotted key in relay.config.ts, e.g. `webhooks.allowPrivateTargets`. */
  key: string
  env: string
  /** `relay serve` flag; when not given, the variable's name without `RELAY_` (`RELAY_ADMISSION` → `--admission`). */
  flag?: string
  kind: OptionKind
  default: string | number | boolean | null
  min?: number
  max?: number
  /** The values a `choice` option takes. */
  choices?: string[]
  why: string
}

/** An option as the loader, `--help` and the README see it: every option has a flag. */
export type OptionSpec = OptionRow & { flag: string }

/** `RELAY_RATE_SEND_PER_MIN` → `--rate-send-per-min`. */
export const flagOfEnv = (env: string): string => `--${env.replace(/^RELAY_/, '').toLowerCase().replaceAll('_', '-')}`

const ROWS: OptionRow[] = [
  { key: 'host', env: 'RELAY_HOST', flag: '--host', kind: 'string', default: '127.0.0.1', why: 'listen on loopback only until the operator puts a TLS proxy in front or opts in to 0.0.0.0' },
  { key: 'port', env: 'RELAY_PORT', flag: '--port', kind: 'port', default: 8080, why: 'a common unprivileged HTTP port; 0 picks a free port' },
  { key: 'dataDir', env: 'RELAY_DATA_DIR', flag: '--data-dir', kind: 'string', default: './data', why: 'database, blobs and key material in one directory that is easy to back up; created on first start' },
  { key: 'logLevel', env: 'RELAY_LOG_LEVEL', flag: '--log-level', kind: 'level', default: 'info', why: 'one line per request and per job run is enough to operate; debug adds detail' },
  { key: 'verifyOnWorker', env: 'RELAY_VERIFY_ON_WORKER', kind: 'bool', default: true, why: 'check request signatures on a worker thread so the event loop keeps serving; false verifies inline (one thread)' },
  { key: 'timestampTolerance', env: 'RELAY_TIMESTAMP_TOLERANCE', kind: 'duration', default: '300s', min: 1000, max: 86_400_000, why: 'docs/protocol.md §1.2: ±5 min absorbs ordinary clock drift while keeping the replay cache small' },
  { key: 'rateLimits.sendPerMin', env: 'RELAY_RATE_SEND_PER_MIN', kind: 'int', default: 30, min: 0, max: 10_000_000, why: 'docs/protocol.md §7: POST /v1/messages plus WebSocket send per agent per sliding minute (0 = unlimited)' },
  { key: 'rateLimits.pollPerMin', env: 'RELAY_RATE_POLL_PER_MIN', kind: 'int', default: 120, min: 0, max: 10_000_000, why: 'docs/protocol.md §7: messages an agent receives through GET /v1/messages per sliding minute, counted per message as MRP counts its receive limit (0 = unlimited)' },
  { key: 'rateLimits.pollRequestsPerMin', env: 'RELAY_RATE_POLL_REQUESTS_PER_MIN', kind: 'int', default: 600, min: 0, max: 10_000_000, why: 'docs/protocol.md §7: GET /v1/messages requests per agent per sliding minute, however few messages they return; 10/s on average lets an agent poll an empty inbox often and still stops a runaway loop (0 = unlimited)' },
  { key: 'rateLimits.requestsPerMin', env: 'RELAY_RATE_REQUESTS_PER_MIN', kind: 'int', default: 600, min: 0, max: 10_000_000, why: 'every other signed HTTP request per agent per sliding minute, reported in X-RateLimit-* on each answer; 10/s on average stops a runaway loop, not an agent (0 = unlimited)' },
  { key: 'rateLimits.addressPerMin', env: 'RELAY_RATE_ADDRESS_PER_MIN', kind: 'int', default: 600, min: 0, max: 10_000_000, why: 'requests per client address per minute, counted before any signature is checked so that floods cost little (0 = unlimited); health, docs and metrics are not counted' },
  { key: 'preauth.memory', env: 'RELAY_PREAUTH_MEMORY', kind: 'size', default: '40MiB', min: 0, max: 2 ** 40, why: 'request bodies and WebSocket handshakes not yet authenticated, over all clients (RSS grows by about 1.5× this at most: what is held, and the buffers of the runtime around it); beyond it new ones get 503 with Retry-After instead of being buffered. Handshakes may hold half of it (each holds room for one unfinished 2 MiB frame), so a reconnect storm leaves the rest to requests' },
  { key: 'preauth.memoryPerAddress', env: 'RELAY_PREAUTH_MEMORY_PER_ADDRESS', kind: 'size', default: '8MiB', min: 0, max: 2 ** 40, why: 'the same per client address, for request bodies and for WebSockets each (429 with Retry-After beyond it), so one client cannot take the whole budget' },
  { key: 'preauth.bodyTimeout', env: 'RELAY_PREAUTH_BODY_TIMEOUT', kind: 'duration', default: '30s', min: 100, max: 3_600_000, why: 'time to receive a JSON request body (2 MiB at most); a slower one gets 408, so slow senders cannot hold memory' },
  { key: 'preauth.disk', env: 'RELAY_PREAUTH_DISK', kind: 'size', default: '256MiB', min: 0, max: 2 ** 50, why: 'disk that blob uploads may use before their signature is verified, over all uploads; beyond it bytes are only hashed and a verified upload gets 503 with Retry-After' },
  { key: 'rateLimits.addressExempt', env: 'RELAY_RATE_ADDRESS_EXEMPT', kind: 'text', default: '127.0.0.0/8,::1', why: 'addresses (IPs or CIDR ranges, comma-separated) that per-address limits leave alone: by default the relay machine itself (local agents, MCP bridges, health checks, load tests); the relay-wide budgets still apply. Behind a proxy on the same machine set RELAY_TRUST_PROXY to its address, or every client would be exempt; set it empty to exempt nothing; a range covering every address is refused' },
  { key: 'rateLimits.newAgentsPerHour', env: 'RELAY_RATE_NEW_AGENTS_PER_HOUR', kind: 'int', default: 100, min: 0, max: 10_000_000, why: 'new keys (agent records) one client address may create per hour, so a script with fresh keys cannot fill the database; exempt addresses are not counted (0 = unlimited)' },
  { key: 'trustProxy', env: 'RELAY_TRUST_PROXY', kind: 'text', default: '', why: 'the proxies (IPs or CIDR ranges, comma-separated; e.g. 127.0.0.1,::1 for nginx or Caddy on the same machine) whose last X-Forwarded-For entry names the client for per-address limits; requests from any other peer count by their own address, and an entry that is not a plain IP counts as the proxy. Empty: no proxy. `true` is refused (it would let every client pick its own address), as is a range covering every address' },
  { key: 'blobs.maxSize', env: 'RELAY_BLOB_MAX_SIZE', kind: 'size', default: '100MiB', min: 1, max: 16 * 1024 ** 3, why: 'docs/protocol.md §6: largest single blob' },
  { key: 'blobs.quota', env: 'RELAY_BLOB_QUOTA', kind: 'size', default: '1GiB', min: 0, max: 2 ** 50, why: 'docs/protocol.md §6: stored blob bytes per agent, so one agent cannot fill the disk' },
  { key: 'blobs.store', env: 'RELAY_BLOB_STORE', kind: 'text', default: '', why: 'empty: blobs in the data directory. s3://bucket/prefix stores them in an S3-compatible bucket (endpoint, region and credentials from AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), which every relay of a cluster shares' },
  { key: 'blobs.totalQuota', env: 'RELAY_BLOB_TOTAL_QUOTA', kind: 'size', default: '0B', min: 0, max: 2 ** 53, why: 'stored blob bytes over all agents together (507 beyond), for a disk shared with other things; 0 = no cap beyond the per-agent quota and the free-disk floor' },
  { key: 'blobs.minFreeDisk', env: 'RELAY_MIN_FREE_DISK', kind: 'size', default: '128MiB', min: 0, max: 2 ** 53, why: 'blob uploads that would leave less free disk than this answer 507, so the database and the system always keep room to write' },
  { key: 'blobs.unattachedTtl', env: 'RELAY_BLOB_UNATTACHED_TTL', kind: 'duration', default: '24h', min: 1000, why: 'docs/protocol.md §6: time to attach an uploaded blob to a message before it is collected' },
  { key: 'messages.expiredRetention', env: 'RELAY_EXPIRED_RETENTION', kind: 'duration', default: '7d', min: 0, why: 'docs/protocol.md §4.6: how long an expired envelope answers status queries' },
  { key: 'messages.requireEncryption', env: 'RELAY_REQUIRE_ENCRYPTION', flag: '--require-encryption', kind: 'bool', default: false, why: 'docs/protocol.md §14.6: true refuses every send that is not encrypted in shape (422 encryption_required: an encrypted body, every attachment marked encrypted), so every message stored looks encrypted; the relay cannot tell whether uploaded blob bytes are ciphertext, and a blob uploaded but never attached keeps its bytes until deleted or expired. Off because agents without encryption support would be locked out. An agent can ask the same for its own inbox in its profile' },
  { key: 'admission.mode', env: 'RELAY_ADMISSION', kind: 'choice', choices: ['open', 'allowlist', 'existing'], default: 'open', why: 'who may use the relay: open — any key becomes an agent on its first request; allowlist — only keys listed with relay admin allow (others 403, no record); existing — agents that exist keep working, new keys get 403' },
  { key: 'admin.keys', env: 'RELAY_ADMIN_KEYS', kind: 'keys', default: '', why: 'public keys (comma-separated) that may call the operator API /v1/admin and see the operator views of the console; always admitted, whatever RELAY_ADMISSION says. Empty: nobody, the API answers 403' },
  { key: 'admission.maxAgents', env: 'RELAY_MAX_AGENTS', kind: 'int', default: 0, min: 0, max: 1_000_000_000, why: 'agent records the relay will hold; a new key beyond it gets 403 (0 = unlimited)' },
  { key: 'ws.maxConnections', env: 'RELAY_WS_MAX_CONNECTIONS', kind: 'int', default: 5, min: 1, max: 1000, why: 'docs/protocol.md §8: WebSockets per agent; enough for a few replicas of one agent' },
  { key: 'ws.pingInterval', env: 'RELAY_WS_PING_INTERVAL', kind: 'duration', default: '30s', min: 1000, why: 'docs/protocol.md §8: keepalive pings; a connection that misses one is closed' },
  { key: 'ws.authTimeout', env: 'RELAY_WS_AUTH_TIMEOUT', kind: 'duration', default: '10s', min: 100, max: 300_000, why: 'docs/protocol.md §8: time a new WebSocket has to send its auth frame before it is closed with 4008' },
  { key: 'ws.preauthPerAddress', env: 'RELAY_WS_PREAUTH_PER_ADDRESS', kind: 'int', default: 4, min: 0, max: 1_000_000, why: 'WebSockets one client address may hold before they authenticate (429 with Retry-After beyond it), so a few addresses of idle sockets cannot lock others out (0 = no cap)' },
  { key: 'ws.preauthMax', env: 'RELAY_WS_PREAUTH_MAX', kind: 'int', default: 128, min: 0, max: 10_000_000, why: 'WebSockets not yet authenticated over all clients (503 with Retry-After beyond it; each may make the runtime buffer one unfinished frame of up to 2 MiB, so this bounds that memory); a quarter is kept for handshakes naming a key that authenticated here before (`/v1/ws?key=…`), so strangers cannot take it all (0 = no cap)' },
  { key: 'webhooks.retryDelays', env: 'RELAY_WEBHOOK_RETRY_DELAYS', kind: 'durations', default: '1m,5m,15m,30m,1h,2h', why: 'docs/protocol.md §9: delays before attempts 2…7 (±10 % jitter)' },
  { key: 'webhooks.timeout', env: 'RELAY_WEBHOOK_TIMEOUT', kind: 'duration', default: '10s', min: 100, max: 300_000, why: 'docs/protocol.md §9: answer time per attempt' },
  { key: 'webhooks.disableAfter', env: 'RELAY_WEBHOOK_DISABLE_AFTER', kind: 'int', default: 3, min: 1, max: 1000, why: 'docs/protocol.md §9: consecutive failed messages that disable a webhook' },
  { key: 'webhooks.allowPrivateTargets', env: 'RELAY_WEBHOOK_ALLOW_PRIVATE_TARGETS', kind: 'bool', default: false, why: 'docs/protocol.md §9: refuse loopback/private targets so agents cannot probe the inside network; home labs turn it on' },
  { key: 'webhooks.concurrency', env: 'RELAY_WEBHOOK_CONCURRENCY', kind: 'int', default: 32, min: 1, max: 1024, why: 'attempts in flight at once, so a slow receiver cannot starve the others' },
  { key: 'database.url', env: 'RELAY_DATABASE_URL', kind: 'text', default: '', why: 'empty: the embedded SQLite file in the data directory (one relay). postgres://user:pass@host:5432/db puts every relay that shares it on one PostgreSQL database: cluster mode' },
  { key: 'database.poolSize', env: 'RELAY_DB_POOL_SIZE', flag: '--db-pool-size', kind: 'int', default: 10, min: 2, max: 1000, why: 'cluster mode: PostgreSQL connections each instance keeps for statements (it opens one more to listen for the others); sends are grouped into shared commits, so a few connections keep a 2–4 core instance busy, and a stock server (max_connections 100) holds 8 instances with room for relay admin and relay migrate. Raise it for instances with many cores and max_connections with it' },
  { key: 'database.lockWait', env: 'RELAY_DB_LOCK_WAIT', kind: 'duration', default: '1s', min: 0, max: 60_000, why: 'how long a write waits while another process (relay admin, a backup, an sqlite3 shell) holds the database lock before answering 503 with Retry-After; reads and health keep answering meanwhile' },
  { key: 'database.durability', env: 'RELAY_DURABILITY', flag: '--durability', kind: 'choice', choices: ['fsync', 'process'], default: 'process', why: 'what a 201 survives (embedded SQLite): process — a crash or kill -9 of the relay, not a power cut or kernel crash, which can lose the last commits; fsync — those too: no answer leaves before its group commit is synced to disk. process is the default because fsync cost about a third of send throughput at 64 requests in flight on a 2-core VM (see Durability in the README)' },
  { key: 'sweepInterval', env: 'RELAY_SWEEP_INTERVAL', kind: 'duration', default: '30s', min: 100, max: 86_400_000, why: 'how often expiry and cleanup jobs run; reads filter by expiry anyway' },
  { key: 'metrics.enabled', env: 'RELAY_METRICS', kind: 'bool', default: false, why: 'GET /metrics (Prometheus) on the main port; off so counts are not public by default' },
  { key: 'metrics.addr', env: 'RELAY_METRICS_ADDR', kind: 'addr', default: null, why: 'serve /metrics on a separate host:port (e.g. 127.0.0.1:9090) instead of the main port' },
]

export const OPTIONS: OptionSpec[] = ROWS.map((o) => ({ ...o, flag: o.flag ?? flagOfEnv(o.env) }))
