import type { RelayError } from '../errors.ts'
import type { PrecheckedAuth } from '../services/authenticator.ts'
import type { AgentRecord } from '../services/models/records.ts'
import type { PreAuthHold } from './preauth.ts'

/** What the pipeline learns about one request; kept beside the Request, not on it. */
export interface RequestState {
  requestId: string
  startedAt: number
  /** Raw body bytes as received (what the signature covers). */
  raw?: Uint8Array
  /** Parsed JSON body, or PARSE_FAILED. */
  parsed?: unknown
  /** Why the body is PARSE_FAILED, answered once the request is authenticated. */
  parseError?: RelayError
  /** A failure while reading the body (e.g. 413), raised once the pipeline can render it. */
  bodyError?: unknown
  agent?: AgentRecord
  /** Resolves once the request's replay-cache entry is committed; the answer waits for it. */
  replayCommitted?: Promise<void>
  /** Streamed uploads: header checks passed, signature still to verify against the streamed hash. */
  pendingAuth?: PrecheckedAuth
  /** Streamed uploads: called once the signature verified (counts the general rate limit). */
  onAuthenticated?: (publicKey: string) => Promise<void>
  /** The error code answered, for the request's log line. */
  errorCode?: string
  /** Body bytes held against the pre-auth budget until the request is authenticated. */
  hold?: PreAuthHold
  /** Route template for logs and metrics, e.g. /v1/agents/:publicKey. */
  route?: string
}

export const PARSE_FAILED = Symbol('parse-failed')

const states = new WeakMap<Request, RequestState>()

export const stateOf = (request: Request): RequestState | undefined => states.get(request)
export const setState = (request: Request, state: RequestState): void => void states.set(request, state)
