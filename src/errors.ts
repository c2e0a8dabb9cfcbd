/** The one error class and the one code → HTTP status table (docs/protocol.md §11). */

export const ERROR_STATUS = {
  bad_request: 400,
  unauthorized: 401,
  invalid_signature: 401,
  timestamp_expired: 401,
  forbidden: 403,
  agent_suspended: 403,
  acl_denied: 403,
  not_found: 404,
  agent_not_found: 404,
  message_not_found: 404,
  blob_not_found: 404,
  /** A request body that did not arrive within the configured time (RFC 9110 §15.5.9); not in the table of docs/protocol.md §11. */
  request_timeout: 408,
  replay_detected: 409,
  blob_referenced: 409,
  payload_too_large: 413,
  /** Blob downloads only: a Range that selects no byte (RFC 9110 §15.5.17); not in docs/protocol.md §11's table. */
  range_not_satisfiable: 416,
  unprocessable_entity: 422,
  /** A plaintext send to an inbox (or a relay) that accepts only end-to-end encrypted messages. */
  encryption_required: 422,
  rate_limit_exceeded: 429,
  internal_error: 500,
  service_unavailable: 503,
  insufficient_storage: 507,
} as const

export type ErrorCode = keyof typeof ERROR_STATUS

export class RelayError extends Error {
  readonly status: number
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details: unknown = null,
    /** Extra response headers, e.g. Retry-After on 429. */
    readonly headers?: Record<string, string>,
  ) {
    super(message)
    this.name = 'RelayError'
    this.status = ERROR_STATUS[code]
  }
}

/** Field path → problem, the shape of `details` for every 400 that names fields. */
export type FieldErrors = Record<string, string>

export const badRequest = (message: string, fields?: FieldErrors): RelayError =>
  new RelayError('bad_request', message, fields && Object.keys(fields).length ? { fields } : null)

export function errorBody(code: ErrorCode, message: string, details: unknown, requestId: string) {
  return { error: { code, message, details: details ?? null, request_id: requestId } }
}
