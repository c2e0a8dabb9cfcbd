/**
 * The request path, in the order a request meets it (docs/protocol.md §1.2):
 *
 * 1. `begin` — a request id, the client address the server saw.
 * 2. `readBody` (the route's parse step) — for signed routes, the address's request rate and the
 *    signature headers' shape and timestamp window, before a body byte is read; then the body, held
 *    against the pre-auth budget and read within its deadline. Upload bodies are left to the route (cut
 *    only when they arrive slower than the minimum rate).
 * 3. `authorize` (the route's resolve step) — HEAD only where declared; the signature over the exact
 *    body bytes, the operator check, path parameters, the general per-agent rate limit. Hands the route
 *    its typed `caller` (or `upload`).
 * 4. the route's handler, then `settle` — the answer waits until the replay entry is committed.
 *
 * Which of these a route runs is what it declares as `auth` (route-auth.ts). The pre-auth budget is
 * owned here: a request's hold is released once it is authenticated, refused or answered.
 */
import { bodyHash, canonicalStrings } from '../auth/canonical.ts'
import { PUBLIC_KEY_PATTERN } from '../auth/keys.ts'
import { RelayError, badRequest, type FieldErrors } from '../errors.ts'
import type { Clock } from '../lib/clock.ts'
import { newRequestId } from '../lib/ids.ts'
import { JsonTextError, MAX_JSON_DEPTH, parseJsonText } from '../lib/json-text.ts'
import type { Logger } from '../lib/logger.ts'
import { pathWithQuery } from '../lib/url.ts'
import type { Authenticator, PrecheckedAuth } from '../services/authenticator.ts'
import { parseContentLength } from '../services/blobs.ts'
import type { AgentRecord } from '../services/models/records.ts'
import type { RateLimiter } from '../services/rate-limiter.ts'
import { withRateHeaders } from '../services/rate-limiter.ts'
import { BodyDeadlines, readRawBody, watchRate } from './body.ts'
import { PARSE_FAILED, type AuthDeclaration, type Inbound, type PendingUpload, type RouteSteps } from './inbound.ts'
import { clientAddressOf, type Claimant, type PreAuthBudget } from './preauth.ts'

/** Whole-request limit for JSON endpoints (docs/protocol.md §4.3, §12). Blob uploads stream instead. */
export const MAX_JSON_REQUEST_BYTES = 2 * 1024 * 1024

/**
 * What one upload whose signature is not verified yet counts against the pre-auth budget: about what it
 * keeps in process memory while it streams to disk (the runtime's current chunk, one write batch being
 * gathered and one being written); how many may run at once is capped besides (UNVERIFIED_UPLOAD_SLOTS
 * in preauth.ts). Beyond either an upload is refused before its body.
 */
export const UNVERIFIED_UPLOAD_BYTES = 3 * 1024 * 1024

/** `{publicKey}` may be `me`, the caller's own key (`/v1/agents/me`, `/v1/agents/me/acl`, …). */
export const ME = 'me'

export interface PipelineDeps {
  authenticator: Authenticator
  /** Request rate per address and memory for bodies not yet authenticated. */
  preauth: PreAuthBudget
  /** The general per-agent rate limit (rateLimits.requestsPerMin). */
  limiter: RateLimiter
  clock: Clock
  /** Whether a key has an active agent record (cached by the storage), before its signature is checked. */
  isKnownKey: (publicKey: string) => Promise<boolean>
  /** Whether a key is one of the operator keys (RELAY_ADMIN_KEYS). */
  isOperator: (publicKey: string) => boolean
  /** The whole body must arrive within this (0: no deadline). */
  bodyTimeoutMs: number
  logger: Logger
}

/** Refuses bytes that are not UTF-8; stateless between calls (no streaming), so one serves every request. */
const strictUtf8 = new TextDecoder('utf-8', { fatal: true })

export class RequestPipeline implements RouteSteps {
  private readonly deadlines: BodyDeadlines | undefined
  /** Uploads have no whole-body deadline (a large one over a slow link takes long), only the minimum rate. */
  private readonly uploadRate = new BodyDeadlines(Number.POSITIVE_INFINITY)

  constructor(private readonly deps: PipelineDeps) {
    this.deadlines = deps.bodyTimeoutMs > 0 ? new BodyDeadlines(deps.bodyTimeoutMs) : undefined
  }

  /** Step 1: what the pipeline knows of a request, put in its context. */
  begin(request: Request): Inbound {
    return { requestId: newRequestId(), startedAt: performance.now(), address: clientAddressOf(request), pipeline: this }
  }

  /** Step 2, the route's parse step: the body as JSON (or null), read under the pre-auth budget. */
  async readBody(inbound: Inbound, request: Request, route: AuthDeclaration): Promise<unknown> {
    try {
      if (route.mode !== 'public') this.precheck(inbound, request)
      if (route.mode === 'upload') return null
      inbound.raw = await this.read(inbound, request)
    } catch (err) {
      // Elysia would turn a throw here into a parse error; `authorize` raises it as is
      inbound.bodyError = err
      return null
    }
    inbound.parsed = decodeJson(inbound.raw, inbound)
    return inbound.parsed === PARSE_FAILED ? null : (inbound.parsed ?? null)
  }

  /** Step 3, the route's resolve step: what the handler gets as `caller` or `upload`. */
  async authorize(
    inbound: Inbound,
    request: Request,
    route: AuthDeclaration,
    params: Record<string, unknown> | undefined,
    headers: Record<string, string>,
  ): Promise<{ caller?: AgentRecord; upload?: PendingUpload }> {
    // HEAD exists only where a route declares it (blob downloads, docs/protocol.md §6); elsewhere the
    // framework would run the GET handler (a HEAD /v1/messages would mark messages delivered)
    if (request.method === 'HEAD' && !route.head) throw new RelayError('not_found', 'No such route')
    if (inbound.bodyError) throw inbound.bodyError
    if (route.mode === 'public') {
      await checkPath(params, undefined)
      return {}
    }
    const pre = this.precheck(inbound, request)
    if (route.mode === 'upload') {
      inbound.hold ??= this.deps.preauth.open(inbound.address, 'body', await this.claimant(inbound, request))
      inbound.hold.takeUpload(UNVERIFIED_UPLOAD_BYTES)
      return { upload: this.pendingUpload(inbound, request, pre, headers) }
    }
    if (inbound.raw === undefined && request.body && !request.bodyUsed) {
      inbound.raw = await this.read(inbound, request)
      inbound.parsed = decodeJson(inbound.raw, inbound)
    }
    let auth
    try {
      auth = await this.deps.authenticator.authenticateRequestDeferred(pre, request.method, pathWithQuery(request.url), bodyHash(inbound.raw))
    } finally {
      // authenticated or refused: either way the body no longer counts as unauthenticated
      inbound.hold?.release()
    }
    const caller = auth.agent
    inbound.caller = caller
    inbound.replayCommitted = auth.committed
    auth.committed.catch(() => {}) // awaited by `settle` (or the error renderer) before the answer leaves
    if (inbound.parsed === PARSE_FAILED) throw inbound.parseError ?? new RelayError('bad_request', 'Malformed request body: expected JSON')
    if (route.mode === 'operator' && !this.deps.isOperator(caller.publicKey)) {
      throw new RelayError('forbidden', 'Only the operator keys (RELAY_ADMIN_KEYS) may use the admin API')
    }
    const { limiter, clock } = this.deps
    await checkPath(params, caller.publicKey, route.ownLimit ? undefined : () => limiter.peek('request', caller.publicKey, clock.now()))
    if (!route.ownLimit) Object.assign(headers, (await limiter.enforce('request', caller.publicKey, clock.now())).headers)
    return { caller }
  }

  /** Step 4, after the handler: the answer leaves only once the replay entry is committed. */
  async settle(inbound: Inbound): Promise<void> {
    const committed = inbound.replayCommitted
    if (!committed) return
    try {
      await committed
    } catch (err) {
      throw this.replayFailure(err)
    }
  }

  /**
   * For the error renderer: the error to answer with, once the replay entry is settled — a request
   * whose signature could not be recorded may not count as answered.
   */
  async failure(inbound: Inbound | undefined, err: unknown): Promise<unknown> {
    inbound?.hold?.release()
    const committed = inbound?.replayCommitted
    if (!committed) return err
    try {
      await committed
      return err
    } catch (replayErr) {
      return this.replayFailure(replayErr)
    }
  }

  private replayFailure(err: unknown): RelayError {
    // a locked database or a full disk says so in its own error; anything else is storage failing
    if (err instanceof RelayError && (err.status === 503 || err.status === 507)) return err
    this.deps.logger.error('replay cache write failed', { error: String(err) })
    return new RelayError('service_unavailable', 'Storage is unavailable; retry later', null, { 'Retry-After': '5' })
  }

  /** Steps 1–2 of docs/protocol.md §1.2, once per request: the address's request rate, then the headers. */
  private precheck(inbound: Inbound, request: Request): PrecheckedAuth {
    if (!inbound.pendingAuth) {
      this.deps.preauth.admit(inbound.address)
      const h = request.headers
      inbound.pendingAuth = this.deps.authenticator.checkHeaders({
        publicKey: h.get('x-m2m-public-key'),
        timestamp: h.get('x-m2m-timestamp'),
        signature: h.get('x-m2m-signature'),
        address: inbound.address,
      })
    }
    return inbound.pendingAuth
  }

  /** The body, held against the pre-auth budget as it arrives, and cut when it is late or too slow. */
  private async read(inbound: Inbound, request: Request): Promise<Uint8Array> {
    inbound.hold ??= this.deps.preauth.open(inbound.address, 'body', await this.claimant(inbound, request))
    return readRawBody(request, MAX_JSON_REQUEST_BYTES, { hold: inbound.hold, deadlines: this.deadlines })
  }

  /**
   * Whether the key the headers name already has an agent record (a cached lookup), so that the body
   * may use the reserve strangers cannot touch. Only asked when there is a body to hold.
   */
  private async claimant(inbound: Inbound, request: Request): Promise<Claimant> {
    const key = inbound.pendingAuth?.publicKey
    if (!key || request.body === null || request.headers.get('content-length') === '0') return 'stranger'
    try {
      return (await this.deps.isKnownKey(key)) ? 'known' : 'stranger'
    } catch {
      return 'stranger' // storage failing: the request is only refused earlier when the budget is full
    }
  }

  /**
   * An upload learns its caller once the streamed body is verified: it counts in the general rate
   * limit then (its answer, success or refusal, carries the headers), but is never refused for it.
   */
  private pendingUpload(inbound: Inbound, request: Request, pre: PrecheckedAuth, headers: Record<string, string>): PendingUpload {
    const { authenticator, limiter, clock } = this.deps
    const target = pathWithQuery(request.url)
    return {
      claimedKey: pre.publicKey,
      // a slot for unverified uploads is held until the end of the body: one that crawls is cut (408)
      rate: watchRate(this.uploadRate, parseContentLength(request.headers.get('content-length'))),
      verify: async (hash) => {
        let caller
        try {
          caller = await authenticator.finish(pre, canonicalStrings(request.method, target, pre.timestamp, hash))
        } finally {
          // verified or refused, the upload no longer counts as unauthenticated
          inbound.hold?.release()
        }
        inbound.caller = caller
        Object.assign(headers, (await limiter.check('request', caller.publicKey, clock.now())).headers)
        return caller.publicKey
      },
    }
  }
}

/**
 * Path parameters are percent-decoded UTF-8: the router hands over null for a segment that does not
 * decode (`%ff%fe`, a surrogate `%ED%A0%80`, an overlong `%C0%AF`); that is a 400 naming the parameter,
 * never a handler running with null. `{publicKey}` may be `me` (the caller), else must be a key.
 */
function pathProblems(params: Record<string, unknown> | undefined, callerKey: string | undefined): FieldErrors {
  const fields: FieldErrors = {}
  if (!params) return fields
  for (const name in params) {
    if (typeof params[name] !== 'string') fields[name] = 'is not valid percent-encoded UTF-8'
  }
  if (typeof params.publicKey === 'string') {
    if (params.publicKey === ME && callerKey) params.publicKey = callerKey
    else if (!PUBLIC_KEY_PATTERN.test(params.publicKey)) fields.publicKey = `must be a public key (43 base64url characters) or "${ME}"`
  }
  return fields
}

/** 400 for path problems; its answer reports the caller's general limit when `rate` reads it. */
async function checkPath(params: Record<string, unknown> | undefined, callerKey: string | undefined, rate?: () => ReturnType<RateLimiter['peek']>): Promise<void> {
  const fields = pathProblems(params, callerKey)
  if (!Object.keys(fields).length) return
  throw withRateHeaders(badRequest('Invalid path parameters', fields), rate ? await rate() : null)
}

/**
 * The request body as JSON: strict UTF-8, nesting at most MAX_JSON_DEPTH levels (checked without
 * recursion), member texts remembered for the fields kept exactly as sent (see lib/json-text.ts).
 * PARSE_FAILED with the reason in `inbound.parseError` when it is not such a document.
 */
function decodeJson(raw: Uint8Array, inbound: Inbound): unknown {
  if (raw.length === 0) return undefined
  let text: string
  try {
    text = strictUtf8.decode(raw)
  } catch {
    inbound.parseError = new RelayError('bad_request', 'Malformed request body: not valid UTF-8')
    return PARSE_FAILED
  }
  try {
    return parseJsonText(text)
  } catch (err) {
    const deep = err instanceof JsonTextError && err.kind === 'depth'
    inbound.parseError = new RelayError('bad_request', deep ? `Malformed request body: ${err.message}` : 'Malformed request body: expected JSON', deep ? { max_depth: MAX_JSON_DEPTH } : null)
    return PARSE_FAILED
  }
}
