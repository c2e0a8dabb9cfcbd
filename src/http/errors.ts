/** The one error renderer: every failure becomes the docs/protocol.md §11 envelope with the request id. */
import { ERROR_STATUS, RelayError, errorBody, type ErrorCode } from '../errors.ts'
import type { Logger } from '../lib/logger.ts'
import { collectFieldErrors } from '../services/validate.ts'

/** Maps anything thrown in the pipeline to a RelayError; unknown errors become internal_error. */
export function toRelayError(code: string | number, error: unknown): { err: RelayError; unexpected: boolean } {
  if (error instanceof RelayError) return { err: error, unexpected: false }
  switch (code) {
    case 'NOT_FOUND':
      return { err: new RelayError('not_found', 'No such route'), unexpected: false }
    case 'VALIDATION': {
      const v = error as { type?: string; all?: { path: string; message: string }[] }
      const root = v.type === 'query' ? 'query' : v.type === 'params' ? 'path' : v.type === 'headers' ? 'headers' : 'body'
      const fields = collectFieldErrors(v.all ?? [], root)
      return { err: new RelayError('bad_request', `Invalid ${root === 'body' ? 'request body' : root + ' parameters'}`, { fields }), unexpected: false }
    }
    case 'PARSE':
      // Elysia wraps whatever the parse hook throws (e.g. 413 from the body cap) in a ParseError
      if ((error as { cause?: unknown })?.cause instanceof RelayError) return { err: (error as { cause: RelayError }).cause, unexpected: false }
      return { err: new RelayError('bad_request', 'Malformed request body: expected JSON'), unexpected: false }
    case 'INVALID_COOKIE_SIGNATURE':
    case 'INVALID_FILE_TYPE':
      return { err: new RelayError('bad_request', 'Malformed request'), unexpected: false }
  }
  return { err: new RelayError('internal_error', 'Internal error'), unexpected: true }
}

export function errorResponse(err: RelayError, requestId: string, extraHeaders?: Record<string, string>): Response {
  const status = ERROR_STATUS[err.code as ErrorCode] ?? 500
  return new Response(JSON.stringify(errorBody(err.code, err.message, err.details, requestId)), {
    status,
    headers: { 'content-type': 'application/json', 'x-request-id': requestId, ...err.headers, ...extraHeaders },
  })
}

export function logUnexpected(logger: Logger, error: unknown, requestId: string, route: string): void {
  const e = error as Error
  logger.error('unexpected error', { request_id: requestId, route, error: e?.message ?? String(e), stack: e?.stack })
}
