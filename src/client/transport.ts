/**
 * The signing transport of the client: builds the exact bytes, signs them (docs/protocol.md, "Signing")
 * and turns answers into values or typed errors — RelayApiError for a refusal, RelayConnectionError when
 * nothing answers, NotARelayError when something that is not a relay does. Answers 429 are retried after
 * their Retry-After, a bounded number of times. Plain TypeScript over fetch: Bun and Node ≥ 20.
 */
import { signRequest, type KeyPair } from '../auth/sign.ts'

export type FetchLike = (request: Request) => Promise<Response>

/** How answers 429 (rate limited) are retried. */
export interface RateLimitRetry {
  /** Further attempts after the first; 0 turns retrying off. Default 3. */
  retries: number
  /** The longest Retry-After waited for; a longer one is returned as the error at once. Default 60 s. */
  maxWaitMs: number
}

export interface RateLimitedInfo {
  method: string
  path: string
  /** 1 for the first retry. */
  attempt: number
  waitMs: number
}

export interface ClientOptions {
  /** e.g. http://127.0.0.1:8080 */
  baseUrl: string
  keys: KeyPair
  /** Defaults to the global fetch; tests pass the relay's in-process handler. */
  fetch?: FetchLike
  /** Wall clock for timestamps (ms); defaults to Date.now. */
  now?: () => number
  /** Retrying of 429 answers (default 3 retries, waits up to 60 s); `false` turns it off. */
  rateLimitRetry?: Partial<RateLimitRetry> | false
  /** Told before each wait for a rate-limited request (e.g. to print a note). */
  onRateLimited?: (info: RateLimitedInfo) => void
}

export const DEFAULT_RATE_LIMIT_RETRY: RateLimitRetry = { retries: 3, maxWaitMs: 60_000 }

/** An error answer from the relay, with its error code (docs/protocol.md, "Errors") and request id. */
export class RelayApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: unknown,
    readonly requestId: string | null,
  ) {
    super(message)
    this.name = 'RelayApiError'
  }
}

/** Where to change the relay address, for messages people read. */
const ADDRESS_HINT = 'check the address (the --relay flag or the RELAY_URL variable of the relay command line)'

/** An unknown route under a --relay URL with a path: most likely the path is the mistake (…/v1). */
export function relayPathHint(relayUrl: string): string | undefined {
  let path: string
  try {
    path = new URL(relayUrl).pathname.replace(/\/+$/, '')
  } catch {
    return undefined
  }
  if (path === '') return undefined
  const base = relayUrl.slice(0, relayUrl.length - path.length)
  return /\/v1$/i.test(path)
    ? `--relay is the relay's address without /v1 (every command adds it): try --relay ${base}${path.slice(0, -3)}`
    : `--relay ${relayUrl} has the path ${path}; the relay answers at its address with paths starting /v1/ (try --relay ${base})`
}

/** Nothing answered at the relay's address: it is down, or the address is wrong. */
export class RelayConnectionError extends Error {
  constructor(
    readonly url: string,
    readonly cause: unknown,
  ) {
    super(`cannot reach the relay at ${url} (${describeCause(cause)}); is it running? If so, ${ADDRESS_HINT}`)
    this.name = 'RelayConnectionError'
  }
}

/** Something answered at the address, but not a relay (no relay answer carries no request id). */
export class NotARelayError extends Error {
  constructor(
    readonly url: string,
    readonly status: number,
    readonly contentType: string | null,
  ) {
    super(
      `${url} answered HTTP ${status}${contentType ? ` (${contentType.split(';')[0]})` : ''} without a relay request id: ` +
        `this is not a relay, or a proxy in front of it answered instead; ${ADDRESS_HINT}`,
    )
    this.name = 'NotARelayError'
  }
}

function describeCause(cause: unknown): string {
  const err = cause as { code?: unknown; message?: unknown; cause?: { code?: unknown; message?: unknown } } | undefined
  const inner = err?.cause
  const code = (typeof inner?.code === 'string' && inner.code) || (typeof err?.code === 'string' && err.code) || ''
  const message = (typeof inner?.message === 'string' && inner.message) || (typeof err?.message === 'string' && err.message) || String(cause)
  return code && !message.includes(code) ? `${code}: ${message}` : message
}

/** An abort asked for by the caller is passed through as it is; anything else thrown by fetch means no answer. */
function isAbort(err: unknown): boolean {
  return (err as { name?: string })?.name === 'AbortError' || (err as { name?: string })?.name === 'TimeoutError'
}

export type Query = Record<string, string | number | boolean | string[] | undefined | null>

export function buildQuery(query?: Query): string {
  if (!query) return ''
  const params = new URLSearchParams()
  for (const [k, v] of Object.entries(query)) {
    if (v === undefined || v === null) continue
    for (const item of Array.isArray(v) ? v : [v]) params.append(k, String(item))
  }
  const text = params.toString()
  return text ? `?${text}` : ''
}

/** 429, or 503 with Retry-After: the relay refused before doing anything and says when to come back. */
function isRetryable(res: Response): boolean {
  return res.status === 429 || (res.status === 503 && res.headers.has('retry-after'))
}

/** Seconds of a Retry-After header (delta-seconds or an HTTP date) in ms; null when absent or unreadable. */
export function retryAfterMs(header: string | null, now = Date.now()): number | null {
  if (header === null || header.trim() === '') return null
  const text = header.trim()
  if (/^\d+$/.test(text)) return Number(text) * 1000
  const at = Date.parse(text)
  return Number.isFinite(at) ? Math.max(0, at - now) : null
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** Last timestamp used per key in this process, shared by every client instance of that key. */
const lastTimestampByKey = new Map<string, number>()

export class Transport {
  readonly baseUrl: string
  readonly keys: KeyPair
  readonly fetchFn: FetchLike
  /** Retrying of 429 answers; change it to change every later call (`{ retries: 0 }` turns it off). */
  rateLimitRetry: RateLimitRetry
  onRateLimited?: (info: RateLimitedInfo) => void
  /**
   * Run once, before the first signed request (its failure is ignored): the client publishes its
   * encryption declaration here. Its own requests pass `{ prelude: false }`.
   */
  beforeFirstRequest?: () => Promise<unknown>
  private preludeRun?: Promise<void>
  private readonly now: () => number

  constructor(opts: ClientOptions) {
    this.baseUrl = opts.baseUrl.replace(/\/+$/, '')
    this.keys = opts.keys
    const fetchFn = opts.fetch ?? ((req: Request) => fetch(req))
    // every way out to the network goes through here, so a refused connection is always typed
    this.fetchFn = async (req) => {
      try {
        return await fetchFn(req)
      } catch (err) {
        if (isAbort(err) || err instanceof RelayConnectionError) throw err
        throw new RelayConnectionError(this.baseUrl, err)
      }
    }
    this.now = opts.now ?? Date.now
    this.rateLimitRetry = opts.rateLimitRetry === false ? { ...DEFAULT_RATE_LIMIT_RETRY, retries: 0 } : { ...DEFAULT_RATE_LIMIT_RETRY, ...opts.rateLimitRetry }
    this.onRateLimited = opts.onRateLimited
  }

  /**
   * A fresh timestamp for each request: identical requests in the same millisecond would otherwise
   * carry identical (deterministic) signatures and be refused as replays.
   */
  nextTimestamp(): string {
    const key = this.keys.publicKey
    const now = this.now()
    const last = lastTimestampByKey.get(key) ?? 0
    // a clock far behind the last value (another relay's clock in tests) starts afresh
    const ms = now < last - 60_000 ? now : Math.max(now, last + 1)
    lastTimestampByKey.set(key, ms)
    return new Date(ms).toISOString()
  }

  /** A signed Request for a path with query; `body` objects are sent as JSON. */
  buildRequest(method: string, pathWithQuery: string, body?: unknown, headers: Record<string, string> = {}): Request {
    let bytes: Uint8Array | undefined
    const h: Record<string, string> = { ...headers }
    if (body instanceof Uint8Array) bytes = body
    else if (typeof body === 'string') bytes = new TextEncoder().encode(body)
    else if (body !== undefined) {
      bytes = new TextEncoder().encode(JSON.stringify(body))
      h['content-type'] ??= 'application/json'
    }
    Object.assign(h, signRequest(this.keys, method, pathWithQuery, bytes, this.nextTimestamp()))
    return new Request(this.baseUrl + pathWithQuery, { method, headers: h, body: bytes as Uint8Array<ArrayBuffer> | undefined })
  }

  /** Resolves once `beforeFirstRequest` has run (at once when there is none). */
  prelude(): Promise<void> {
    const hook = this.beforeFirstRequest
    if (!hook) return Promise.resolve()
    return (this.preludeRun ??= hook().then(
      () => {},
      () => {},
    ))
  }

  /** Sends a signed request once and returns the raw Response (no error mapping, no retry). */
  async send(method: string, pathWithQuery: string, body?: unknown, headers?: Record<string, string>): Promise<Response> {
    await this.prelude()
    return this.fetchFn(this.buildRequest(method, pathWithQuery, body, headers))
  }

  /**
   * Sends `build()` — called again for each attempt, so every attempt is signed afresh — and retries
   * answers 429, and 503 with a Retry-After (the relay is busy: nothing was done), after their
   * Retry-After while `rateLimitRetry` allows. Returns the last answer as is.
   */
  async sendWithRetry(method: string, pathWithQuery: string, build: () => Request, opts: { prelude?: boolean } = {}): Promise<Response> {
    if (opts.prelude !== false) await this.prelude()
    for (let attempt = 1; ; attempt++) {
      const res = await this.fetchFn(build())
      if (!isRetryable(res) || attempt > this.rateLimitRetry.retries) return res
      const waitMs = retryAfterMs(res.headers.get('retry-after')) ?? 1000
      if (waitMs > this.rateLimitRetry.maxWaitMs) return res
      await res.body?.cancel().catch(() => {})
      this.onRateLimited?.({ method, path: pathWithQuery, attempt, waitMs })
      await sleep(waitMs)
    }
  }

  /** Sends a signed request (retrying 429); resolves with the parsed JSON (undefined for 204), throws RelayApiError. */
  async json<T>(method: string, pathWithQuery: string, body?: unknown, opts: { prelude?: boolean } = {}): Promise<T> {
    const res = await this.sendWithRetry(method, pathWithQuery, () => this.buildRequest(method, pathWithQuery, body), opts)
    return readJson<T>(res, this.baseUrl)
  }
}

/**
 * The answer's JSON, or the error it stands for: RelayApiError for the relay's error envelope,
 * NotARelayError for anything else without the request id every relay answer carries.
 */
export async function readJson<T>(res: Response, url: string = res.url): Promise<T> {
  if (res.status === 204) return undefined as T
  const text = await res.text()
  let parsed: any
  try {
    parsed = text ? JSON.parse(text) : undefined
  } catch {
    parsed = undefined
  }
  const e = parsed?.error
  const envelope = typeof e?.code === 'string' && typeof e?.message === 'string'
  if (!res.ok) {
    if (!envelope) assertRelayAnswer(res, url)
    throw new RelayApiError(
      res.status,
      envelope ? e.code : 'http_error',
      envelope ? e.message : `HTTP ${res.status}`,
      e?.details ?? null,
      e?.request_id ?? res.headers.get('x-request-id'),
    )
  }
  assertRelayAnswer(res, url)
  if (parsed === undefined || parsed === null || typeof parsed !== 'object') throw new NotARelayError(url, res.status, res.headers.get('content-type'))
  return parsed as T
}

/** Every relay answer, success or error, carries X-Request-Id: without it, something else answered. */
export function assertRelayAnswer(res: Response, url: string = res.url): void {
  if (!res.headers.has('x-request-id')) throw new NotARelayError(url || 'the relay address', res.status, res.headers.get('content-type'))
}
