/**
 * Relay configuration. Every key is optional; the values shown are the defaults.
 * Precedence: defaults ← this file (or --config FILE) ← RELAY_* environment ← command-line flags.
 * This file must not import anything at runtime: it is loaded next to the compiled binary.
 * See README.md "Configuration" for every option, its environment variable and why it defaults so.
 */
export default {
  host: '127.0.0.1',
  port: 8080,
  dataDir: './data',
  logLevel: 'info',
  verifyOnWorker: true,
  timestampTolerance: '300s',
  rateLimits: { sendPerMin: 30, pollPerMin: 120 },
  blobs: { maxSize: '100MiB', quota: '1GiB', unattachedTtl: '24h' },
  messages: { expiredRetention: '7d' },
  ws: { maxConnections: 5, pingInterval: '30s' },
  webhooks: {
    retryDelays: '1m,5m,15m,30m,1h,2h',
    timeout: '10s',
    disableAfter: 3,
    allowPrivateTargets: false,
    concurrency: 32,
  },
  sweepInterval: '30s',
  metrics: { enabled: false, addr: null },
}
