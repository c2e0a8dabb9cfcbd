/**
 * The Elysia application: request ids, raw-body capture, signature authentication (before any
 * validation, docs/protocol.md §1.2), one error renderer, access logs. Routes come from feature plugins.
 */
import { Elysia } from 'elysia'
import { bodyHash } from '../auth/canonical.ts'
import type { Config } from '../config/config.ts'
import { RelayError } from '../errors.ts'
import type { Clock } from '../lib/clock.ts'
import { newRequestId } from '../lib/ids.ts'
import { JsonTextError, MAX_JSON_DEPTH, parseJsonText } from '../lib/json-text.ts'
import type { Logger } from '../lib/logger.ts'
import type { Authenticator, PrecheckedAuth } from '../services/authenticator.ts'
import type { AgentRecord } from '../services/models/records.ts'
import { BodyDeadlines, readRawBody } from './body.ts'
import { clientAddressOf, type PreAuthBudget } from './preauth.ts'
import { errorResponse, logUnexpected, toRelayError } from './errors.ts'
import { pathWithQuery } from '../lib/url.ts'
import { PARSE_FAILED, setState, stateOf, type RequestState } from './request-state.ts'

/** Whole-request limit for JSON endpoints (docs/protocol.md §4.3, §12). Blob uploads stream instead. */
export const MAX_JSON_REQUEST_BYTES = 2 * 1024 * 1024

/** Paths that need no signature (docs/protocol.md §1.1). */
export function isPublicPath(path: string): boolean {
  return (
    path.startsWith('/v1/health') ||
    path === '/v1/openapi.json' ||
    path === '/docs' ||
    path.startsWith('/docs/') ||
    path === '/console' ||
    path.startsWith('/console/') ||
    path === '/metrics'
  )
}

/** Routes that read their own body as a stream (blob uploads). */
const streamedBodies = new Set<string>()
export const markStreamedBody = (path: string) => streamedBodies.add(path)

export interface AppDeps {
  config: Config
  clock: Clock
  logger: Logger
  authenticator: Authenticator
  /** Request rate per address and memory for bodies not yet authenticated. */
  preauth: PreAuthBudget
  /** Observes every finished request (metrics). */
  onRequestDone?: (info: { method: string; route: string; status: number; durationMs: number }) => void
}

/** Refuses bytes that are not UTF-8; stateless between calls (no streaming), so one serves every request. */
const strictUtf8 = new TextDecoder('utf-8', { fatal: true })

/**
 * The request body as JSON: strict UTF-8, nesting at most MAX_JSON_DEPTH levels (checked without
 * recursion), member texts remembered for the fields kept exactly as sent (see lib/json-text.ts).
 * PARSE_FAILED with the reason in `state.parseError` when it is not such a document.
 */
function decodeJson(raw: Uint8Array, state: RequestState): unknown {
  if (raw.length === 0) return undefined
  let text: string
  try {
    text = strictUtf8.decode(raw)
  } catch {
    state.parseError = new RelayError('bad_request', 'Malformed request body: not valid UTF-8')
    return PARSE_FAILED
  }
  try {
    return parseJsonText(text)
  } catch (err) {
    const deep = err instanceof JsonTextError && err.kind === 'depth'
    state.parseError = new RelayError('bad_request', deep ? `Malformed request body: ${err.message}` : 'Malformed request body: expected JSON', deep ? { max_depth: MAX_JSON_DEPTH } : null)
    return PARSE_FAILED
  }
}

function signedInput(request: Request) {
  const h = request.headers
  return { publicKey: h.get('x-m2m-public-key'), timestamp: h.get('x-m2m-timestamp'), signature: h.get('x-m2m-signature'), address: clientAddressOf(request) }
}

/** The authenticated caller of a request; only valid in routes that are not public. */
export function callerOf(request: Request): AgentRecord {
  const agent = stateOf(request)?.agent
  if (!agent) throw new RelayError('unauthorized', 'Authentication required')
  return agent
}

export function createApp(deps: AppDeps) {
  const { logger, authenticator, preauth } = deps
  const deadlines = deps.config.preauth.bodyTimeoutMs > 0 ? new BodyDeadlines(deps.config.preauth.bodyTimeoutMs) : undefined

  /**
   * Before a body byte is read (docs/protocol.md §1.2 steps 1–2, cheapest first): the client address's request
   * rate, then the signature headers' shape and the timestamp window. A request that fails is answered
   * at once; its body is never buffered (the runtime discards it as it arrives).
   */
  const admit = (state: RequestState, request: Request): PrecheckedAuth => {
    if (!state.pendingAuth) {
      preauth.admit(clientAddressOf(request))
      state.pendingAuth = authenticator.checkHeaders(signedInput(request))
    }
    return state.pendingAuth
  }

  /** The body, held against the pre-auth budget and read within the body deadline. */
  const readBody = (state: RequestState, request: Request): Promise<Uint8Array> => {
    state.hold ??= preauth.open(clientAddressOf(request))
    return readRawBody(request, MAX_JSON_REQUEST_BYTES, { hold: state.hold, deadlines })
  }

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
        if (!isPublicPath(path)) admit(state, request)
        state.raw = await readBody(state, request)
      } catch (err) {
        // Elysia would turn a throw here into a parse error; the transform step rethrows it as is
        state.bodyError = err
        return null
      }
      state.parsed = decodeJson(state.raw, state)
      return state.parsed === PARSE_FAILED ? null : (state.parsed ?? null)
    })
    .onTransform({ as: 'global' }, async ({ request, path }) => {
      const state = stateOf(request) as RequestState
      if (state.bodyError) throw state.bodyError
      if (isPublicPath(path)) return
      const pre = admit(state, request)
      // blob uploads: headers and window are checked; the route finishes the signature check once the
      // streamed hash is known (docs/protocol.md §6)
      if (streamedBodies.has(path)) return
      if (state.raw === undefined && request.body && !request.bodyUsed) {
        state.raw = await readBody(state, request)
        state.parsed = decodeJson(state.raw, state)
      }
      let auth
      try {
        auth = await authenticator.authenticateRequestDeferred(pre, request.method, pathWithQuery(request.url), bodyHash(state.raw))
      } finally {
        // authenticated or refused: either way the body no longer counts as unauthenticated
        state.hold?.release()
      }
      state.agent = auth.agent
      // awaited by relay.handle before the answer leaves (see authenticateRequestDeferred)
      state.replayCommitted = auth.committed
      auth.committed.catch(() => {})
      if (state.parsed === PARSE_FAILED) throw state.parseError ?? new RelayError('bad_request', 'Malformed request body: expected JSON')
    })
    .onError({ as: 'global' }, ({ code, error, request, path, set }) => {
      const state = stateOf(request)
      const requestId = state?.requestId ?? newRequestId()
      const { err, unexpected } = toRelayError(code, error)
      if (state) state.errorCode = err.code
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
          code: state.errorCode,
        })
      }
    })
}

export type RelayApp = ReturnType<typeof createApp>
