/**
 * The names of the relay's metrics, in one place so that the feature that measures something and the
 * README that documents it agree. A feature registers its metric with `ctx.metrics.counter(METRICS.x)`
 * (or gauge/histogram); asking twice returns the same metric.
 */
export const METRICS = {
  // --- recorded by the metrics feature itself ---
  httpRequests: { type: 'counter', name: 'relay_http_requests_total', help: 'HTTP requests answered, by method, route template and status.', labelNames: ['method', 'route', 'status'] },
  httpDuration: { type: 'histogram', name: 'relay_http_request_duration_seconds', help: 'Time to answer HTTP requests, by method, route template and status.', labelNames: ['method', 'route', 'status'] },
  jobRuns: { type: 'counter', name: 'relay_job_runs_total', help: 'Background job runs, by job and outcome (ok or error).', labelNames: ['job', 'outcome'] },
  jobDuration: { type: 'histogram', name: 'relay_job_duration_seconds', help: 'Duration of background job runs, by job.', labelNames: ['job'] },
  /** Counted from the committed-message signal (this instance's only): message features must not increment it themselves. */
  messagesSent: { type: 'counter', name: 'relay_messages_sent_total', help: 'Messages accepted for delivery (HTTP and WebSocket sends).', labelNames: [] },
  agents: { type: 'gauge', name: 'relay_agents', help: 'Agents stored, by status.', labelNames: ['status'] },
  messages: { type: 'gauge', name: 'relay_messages', help: 'Messages stored, by effective status.', labelNames: ['status'] },
  blobRecords: { type: 'gauge', name: 'relay_blob_records', help: 'Unexpired blob records.', labelNames: [] },
  blobRecordBytes: { type: 'gauge', name: 'relay_blob_record_bytes', help: 'Bytes of unexpired blob records (what counts against quotas).', labelNames: [] },
  blobStoredBytes: { type: 'gauge', name: 'relay_blob_stored_bytes', help: 'Bytes of distinct blob contents on disk (content-addressed), including contents not yet collected.', labelNames: [] },
  webhooks: { type: 'gauge', name: 'relay_webhooks', help: 'Registered webhooks, by state (enabled or disabled).', labelNames: ['state'] },
  webhookQueue: { type: 'gauge', name: 'relay_webhook_queue_depth', help: 'Webhook deliveries waiting for an attempt or in flight.', labelNames: [] },
  databaseBytes: { type: 'gauge', name: 'relay_database_size_bytes', help: 'Size of the database file (pages in use).', labelNames: [] },
  walBytes: { type: 'gauge', name: 'relay_database_wal_bytes', help: 'Size of the database write-ahead log.', labelNames: [] },

  // --- for the features that own the event (register and increment where it happens) ---
  /** channel: poll | read | websocket | webhook */
  messagesDelivered: { type: 'counter', name: 'relay_messages_delivered_total', help: 'Messages that became delivered, by channel.', labelNames: ['channel'] },
  messagesExpired: { type: 'counter', name: 'relay_messages_expired_total', help: 'Messages that expired undelivered.', labelNames: [] },
  /** A gauge: set it with a collect function reading the socket hub, or inc/dec on open/close. */
  websocketConnections: { type: 'gauge', name: 'relay_websocket_connections', help: 'Open authenticated WebSocket connections.', labelNames: [] },
  /** outcome: success | http_error | timeout | network_error | refused (private target) */
  webhookAttempts: { type: 'counter', name: 'relay_webhook_attempts_total', help: 'Webhook delivery attempts, by outcome.', labelNames: ['outcome'] },
  blobUploadedBytes: { type: 'counter', name: 'relay_blob_uploaded_bytes_total', help: 'Bytes received by successful blob uploads.', labelNames: [] },
} as const

export type MetricName = keyof typeof METRICS
export type MetricType = 'counter' | 'gauge' | 'histogram'
