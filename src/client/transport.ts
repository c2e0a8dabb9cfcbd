/**
 * The signing transport of the client: builds the exact bytes, signs them (SPEC §1.1) and turns
 * error envelopes into RelayApiError. Pure TypeScript over fetch; usable from any agent.
 */
import { signRequest, type KeyPair } from '../auth/sign.ts'

export type FetchLike = (request: Request) => Promise<Response>

export interface ClientOptions {
  /** e.g. http://127.0.0.1:8080 */
  baseUrl: string
  keys: KeyPair
  /** Defaults to the global fetch; tests pass the relay's in-process handler. */
  fetch?: FetchLike
  /** Wall clock for timestamps (ms); defaults to Date.now. */
  now?: () => number
}

/** An error answer from the relay, with its SPEC §11 code and request id. */
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

/** Last timestamp used per key in this process, shared by every client instance of that key. */
const lastTimestampByKey = new Map<string, number>()

export class Transport {
  readonly baseUrl: string
  readonly keys: KeyPair
  readonly fetchFn: FetchLike
  private readonly now: () => number

  constructor(opts: ClientOptions) {
    this.baseUrl = opts.baseUrl.replace(/\/+$/, '')
    this.keys = opts.keys
    this.fetchFn = opts.fetch ?? ((req) => fetch(req))
    this.now = opts.now ?? Date.now
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

  /** Sends a signed request and returns the raw Response (no error mapping). */
  send(method: string, pathWithQuery: string, body?: unknown, headers?: Record<string, string>): Promise<Response> {
    return this.fetchFn(this.buildRequest(method, pathWithQuery, body, headers))
  }

  /** Sends a signed request; resolves with the parsed JSON (undefined for 204), throws RelayApiError. */
  async json<T>(method: string, pathWithQuery: string, body?: unknown): Promise<T> {
    const res = await this.send(method, pathWithQuery, body)
    return readJson<T>(res)
  }
}

export async function readJson<T>(res: Response): Promise<T> {
  if (res.status === 204) return undefined as T
  const text = await res.text()
  let parsed: any
  try {
    parsed = text ? JSON.parse(text) : undefined
  } catch {
    parsed = undefined
  }
  if (!res.ok) {
    const e = parsed?.error
    throw new RelayApiError(
      res.status,
      e?.code ?? 'http_error',
      e?.message ?? `HTTP ${res.status}`,
      e?.details ?? null,
      e?.request_id ?? res.headers.get('x-request-id'),
    )
  }
  return parsed as T
}
