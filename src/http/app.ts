/**
 * The Elysia application: request ids, raw-body capture, signature authentication (before any
 * validation, SPEC §1.2), one error renderer, access logs. Routes come from feature plugins.
 */
import { Elysia } from 'elysia'
import { bodyHash } from '../auth/canonical.ts'
import type { Config } from '../config/config.ts'
import { RelayError } from '../errors.ts'
import type { Clock } from '../lib/clock.ts'
import { newRequestId } from '../lib/ids.ts'
import type { Logger } from '../lib/logger.ts'
import type { Authenticator } from '../services/authenticator.ts'
import type { AgentRow } from '../storage/agents-repo.ts'
import { readRawBody } from './body.ts'
import { errorResponse, logUnexpected, toRelayError } from './errors.ts'
import { pathWithQuery } from '../lib/url.ts'
import { PARSE_FAILED, setState, stateOf, type RequestState } from './request-state.ts'

/** Whole-request limit for JSON endpoints (SPEC §4.3, §12). Blob uploads stream instead. */
export const MAX_JSON_REQUEST_BYTES = 2 * 1024 * 1024

/** Paths that need no signature (SPEC §1.1). */
export function isPublicPath(path: string): boolean {
  return path.startsWith('/v1/health') || path === '/v1/openapi.json' || path === '/docs' || path.startsWith('/docs/') || path === '/metrics'
}

/** Routes that read their own body as a stream (blob uploads). */
const streamedBodies = new Set<string>()
export const markStreamedBody = (path: string) => streamedBodies.add(path)

export interface AppDeps {
  config: Config
  clock: Clock
  logger: Logger
  authenticator: Authenticator
  /** Observes every finished request (metrics). */
  onRequestDone?: (info: { method: string; route: string; status: number; durationMs: number }) => void
}

function decodeJson(raw: Uint8Array): unknown {
  if (raw.length === 0) return undefined
  try {
    return JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(raw))
  } catch {
    return PARSE_FAILED
  }
}

/** The authenticated caller of a request; only valid in routes that are not public. */
export function callerOf(request: Request): AgentRow {
  const agent = stateOf(request)?.agent
  if (!agent) throw new RelayError('unauthorized', 'Authentication required')
  return agent
}

export function createApp(deps: AppDeps) {
  const { logger, authenticator } = deps
  return new Elysia({ normalize: false, aot: true })
    .onRequest(({ request, set }) => {
      const state: RequestState = { requestId: newRequestId(), startedAt: performance.now() }
      setState(request, state)
      set.headers['x-request-id'] = state.requestId
    })
    .onParse({ as: 'global' }, async ({ request, path }) => {
      const state = stateOf(request) as RequestState
      if (streamedBodies.has(path)) return null
      try {
        state.raw = await readRawBody(request, MAX_JSON_REQUEST_BYTES)
      } catch (err) {
        // Elysia would turn a throw here into a parse error; the transform step rethrows it as is
        state.bodyError = err
        return null
      }
      state.parsed = decodeJson(state.raw)
      return state.parsed === PARSE_FAILED ? null : (state.parsed ?? null)
    })
    .onTransform({ as: 'global' }, async ({ request, path }) => {
      const state = stateOf(request) as RequestState
      if (state.bodyError) throw state.bodyError
      if (isPublicPath(path)) return
      if (state.raw === undefined && request.body && !request.bodyUsed && !streamedBodies.has(path)) {
        state.raw = await readRawBody(request, MAX_JSON_REQUEST_BYTES)
        state.parsed = decodeJson(state.raw)
      }
      const h = request.headers
      const input = { publicKey: h.get('x-m2m-public-key'), timestamp: h.get('x-m2m-timestamp'), signature: h.get('x-m2m-signature') }
      if (streamedBodies.has(path)) {
        // blob uploads: headers and window now, before a byte is read; the route finishes the
        // signature check once the streamed hash is known (SPEC §6)
        state.pendingAuth = authenticator.checkHeaders(input)
        return
      }
      const auth = await authenticator.authenticateRequestDeferred(input, request.method, pathWithQuery(request.url), bodyHash(state.raw))
      state.agent = auth.agent
      // awaited by relay.handle before the answer leaves (see authenticateRequestDeferred)
      state.replayCommitted = auth.committed
      auth.committed.catch(() => {})
      if (state.parsed === PARSE_FAILED) throw new RelayError('bad_request', 'Malformed request body: expected JSON')
    })
    .onError({ as: 'global' }, ({ code, error, request, path, set }) => {
      const state = stateOf(request)
      const requestId = state?.requestId ?? newRequestId()
      const { err, unexpected } = toRelayError(code, error)
      set.status = err.status
      if (unexpected) logUnexpected(logger, error, requestId, path)
      return errorResponse(err, requestId)
    })
    .onAfterResponse({ as: 'global' }, ({ request, set, path, route }) => {
      const state = stateOf(request)
      if (!state) return
      const status = typeof set.status === 'number' ? set.status : 200
      const durationMs = performance.now() - state.startedAt
      deps.onRequestDone?.({ method: request.method, route: route || 'unmatched', status, durationMs })
      if (logger.enabled('info')) {
        logger.info('request', {
          request_id: state.requestId,
          method: request.method,
          route: route || path,
          status,
          duration_ms: Math.round(durationMs * 100) / 100,
          agent: state.agent?.publicKey,
        })
      }
    })
}

export type RelayApp = ReturnType<typeof createApp>
