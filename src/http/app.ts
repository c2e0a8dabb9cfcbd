/**
 * The Elysia application: the request pipeline's first step, one error renderer, access logs. Routes
 * come from feature plugins; each declares its `auth` (route-auth.ts), which runs the pipeline's steps
 * for it (pipeline.ts).
 */
import { Elysia, type AnyElysia } from 'elysia'
import { RelayError } from '../errors.ts'
import { newRequestId } from '../lib/ids.ts'
import type { Logger } from '../lib/logger.ts'
import { pathStart } from '../lib/url.ts'
import { lingerAfter } from './body.ts'
import { errorResponse, logUnexpected, toRelayError } from './errors.ts'
import type { Inbound } from './inbound.ts'
import { RequestPipeline, type PipelineDeps } from './pipeline.ts'
import { DECLARED_AUTH, routeAuth } from './route-auth.ts'

export { MAX_JSON_REQUEST_BYTES } from './pipeline.ts'

export interface AppDeps extends Omit<PipelineDeps, 'logger'> {
  logger: Logger
  /** Observes every finished request (metrics). */
  onRequestDone?: (info: { method: string; route: string; status: number; durationMs: number }) => void
}

export function createApp(deps: AppDeps) {
  const { logger } = deps
  const pipeline = new RequestPipeline({ ...deps, logger })

  return new Elysia({ normalize: false, aot: true })
    .use(routeAuth)
    .onRequest((ctx) => {
      const inbound = pipeline.begin(ctx.request)
      ;(ctx as unknown as { inbound: Inbound }).inbound = inbound
      ctx.set.headers['x-request-id'] = inbound.requestId
    })
    .onError({ as: 'global' }, async (ctx) => {
      const { code, error, path, set } = ctx
      const inbound = (ctx as unknown as { inbound?: Inbound }).inbound
      const requestId = inbound?.requestId ?? newRequestId()
      const { err, unexpected } = toRelayError(code, await pipeline.failure(inbound, error))
      if (inbound) inbound.errorCode = err.code
      set.status = err.status
      if (unexpected) logUnexpected(logger, error, requestId, path)
      return await lingerAfter(errorResponse(err, requestId), ctx.request)
    })
    .onAfterResponse({ as: 'global' }, ({ inbound, request, set, path, route }) => {
      if (!inbound) return
      // whatever ended the request, its body no longer counts as unauthenticated
      inbound.hold?.release()
      const status = typeof set.status === 'number' ? set.status : 200
      const durationMs = performance.now() - inbound.startedAt
      deps.onRequestDone?.({ method: request.method, route: route || 'unmatched', status, durationMs })
      if (logger.enabled('info')) {
        logger.info('request', {
          request_id: inbound.requestId,
          method: request.method,
          route: route || path,
          status,
          duration_ms: Math.round(durationMs * 100) / 100,
          agent: inbound.caller?.publicKey,
          code: inbound.errorCode,
        })
      }
    })
}

/**
 * The router finds the path by searching for "/" from the 12th character of the URL, which a very
 * short Host header (`Host: x`) defeats; such requests get a placeholder host. The path and query,
 * which the signature covers, are unchanged.
 */
export function normalizeHost(request: Request): Request {
  // HTTP/1.0 without a Host header (HAProxy's default health check): the runtime gives the bare path
  if (request.url.startsWith('/')) return new Request('http://relay.invalid' + request.url, request)
  const slash = pathStart(request.url)
  if (slash < 0 || slash >= 11) return request
  return new Request('http://relay.invalid' + request.url.slice(slash), request)
}

/** Throws at start-up when a route did not declare its `auth`: no route is signed or public by default. */
export function assertEveryRouteDeclaresAuth(app: AnyElysia): void {
  for (const route of app.routes) {
    const parse = (route.hooks as { parse?: unknown[] } | undefined)?.parse ?? []
    const hooks = Array.isArray(parse) ? parse : [parse]
    const ok = hooks.some((h) => {
      const fn = typeof h === 'function' ? h : (h as { fn?: unknown })?.fn
      return typeof fn === 'function' && DECLARED_AUTH in fn
    })
    if (!ok) throw new RelayError('internal_error', `route ${route.method} ${route.path} does not declare its auth`)
  }
}

export type RelayApp = ReturnType<typeof createApp>
