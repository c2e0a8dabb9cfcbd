/**
 * What the pipeline knows about one request, in the Elysia context of that request (`inbound`). It is
 * made by the pipeline's first step from the client address the server found, and read by the route's
 * declared auth step (route-auth.ts), the error renderer and the access log.
 */
import type { RelayError } from '../errors.ts'
import type { PrecheckedAuth } from '../services/authenticator.ts'
import type { AgentRecord } from '../services/models/records.ts'
import type { BodyRateWatch } from '../services/blobs.ts'
import type { PreAuthHold } from './preauth.ts'

export interface Inbound {
  requestId: string
  startedAt: number
  /** The client address per-address limits count (preauth.ts); null for in-process callers and exempt ones. */
  address: string | null
  /** The steps the route's declared auth runs (pipeline.ts). */
  pipeline: RouteSteps
  /** Raw body bytes as received (what the signature covers). */
  raw?: Uint8Array
  /** Parsed JSON body, or PARSE_FAILED. */
  parsed?: unknown
  /** Why the body is PARSE_FAILED, answered once the request is authenticated. */
  parseError?: RelayError
  /** A failure while reading the body (e.g. 413), raised once the pipeline can render it. */
  bodyError?: unknown
  /** Header shape and timestamp window checked (docs/protocol.md §1.2 steps 1–2). */
  pendingAuth?: PrecheckedAuth
  /** The authenticated caller. */
  caller?: AgentRecord
  /** Resolves once the request's replay-cache entry is committed; the answer waits for it. */
  replayCommitted?: Promise<void>
  /** Body bytes held against the pre-auth budget until the request is authenticated. */
  hold?: PreAuthHold
  /** The error code answered, for the request's log line. */
  errorCode?: string
}

/** Who may call a route, as it declares in its options (route-auth.ts). */
export type AuthMode = 'public' | 'agent' | 'operator' | 'upload'
export interface AuthDeclaration {
  mode: AuthMode
  ownLimit?: boolean
  head?: boolean
}

/** What an upload route receives: the key that claims to sign, and the step that checks the claim. */
export interface PendingUpload {
  claimedKey: string
  /** The minimum-rate watch over the body (408 when it arrives too slowly), for the blob service. */
  rate: BodyRateWatch
  /** Checks the signature over the streamed body's hash; resolves to the caller's key, or throws 401. */
  verify(hash: string): Promise<string>
}

/** The pipeline's steps that a route's declared auth runs, in this order (pipeline.ts). */
export interface RouteSteps {
  /** The route's parse step: the body as JSON (or null), read under the pre-auth budget. */
  readBody(inbound: Inbound, request: Request, route: AuthDeclaration): Promise<unknown>
  /** The route's resolve step: what the handler gets as `caller` or `upload`. */
  authorize(
    inbound: Inbound,
    request: Request,
    route: AuthDeclaration,
    params: Record<string, unknown> | undefined,
    headers: Record<string, string>,
  ): Promise<{ caller?: AgentRecord; upload?: PendingUpload }>
  /** After the handler: the answer leaves once the replay entry is committed. */
  settle(inbound: Inbound): Promise<void>
}

export const PARSE_FAILED = Symbol('parse-failed')
