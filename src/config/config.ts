import type { LogLevel } from '../lib/logger.ts'

/** The validated configuration the relay runs with; units are in the names. */
export interface Config {
  host: string
  port: number
  dataDir: string
  logLevel: LogLevel
  verifyOnWorker: boolean
  timestampToleranceMs: number
  rateLimits: { sendPerMin: number; pollPerMin: number; pollRequestsPerMin: number; requestsPerMin: number; addressPerMin: number; addressExempt: string; newAgentsPerHour: number }
  /** Cost allowed before a request or socket is authenticated. */
  preauth: { memoryBytes: number; memoryPerAddressBytes: number; bodyTimeoutMs: number; diskBytes: number }
  /** Proxies (IPs, CIDR ranges; comma-separated) trusted for X-Forwarded-For; empty: none. */
  trustProxy: string
  blobs: { store: string; maxSizeBytes: number; quotaBytes: number; totalQuotaBytes: number; minFreeDiskBytes: number; unattachedTtlMs: number }
  admission: { mode: 'open' | 'allowlist' | 'existing'; maxAgents: number }
  /** Keys that may call /v1/admin (and are always admitted). */
  admin: { keys: string[] }
  messages: { expiredRetentionMs: number; requireEncryption: boolean }
  ws: { maxConnections: number; pingIntervalMs: number; authTimeoutMs: number; preauthPerAddress: number; preauthMax: number }
  webhooks: {
    retryDelaysMs: number[]
    timeoutMs: number
    disableAfter: number
    allowPrivateTargets: boolean
    concurrency: number
  }
  /** `durability`: what an acknowledged write survives (SQLite): a power loss (`fsync`) or a crash of the process (`process`). */
  database: { url: string; poolSize: number; lockWaitMs: number; durability: 'fsync' | 'process' }
  sweepIntervalMs: number
  metrics: { enabled: boolean; addr: { host: string; port: number } | null }
}

/** A partial override, as tests pass it to createRelay. */
export type ConfigOverrides = {
  [K in keyof Config]?: Config[K] extends object ? (Config[K] extends unknown[] ? Config[K] : Partial<Config[K]>) : Config[K]
}
