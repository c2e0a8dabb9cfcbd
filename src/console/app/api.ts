/**
 * Signed requests from the browser, exactly as any client signs them (docs/protocol.md §1.1): the
 * canonical string `METHOD\nPATH\nTIMESTAMP\nBODY_HASH`, Ed25519 over it, three X-M2M-* headers.
 * Uploads go through XMLHttpRequest for its upload progress events; the WebSocket authenticates with
 * its first frame (docs/protocol.md §8).
 */
import { b64url, bodyHash, signText, type Identity } from './keys.ts'

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: unknown = null,
  ) {
    super(message)
  }
}

let lastMs = 0
/** RFC 3339 with milliseconds, one millisecond apart at least, so two requests never sign the same text. */
function timestamp(): string {
  lastMs = Math.max(Date.now(), lastMs + 1)
  return new Date(lastMs).toISOString()
}

const EMPTY = new Uint8Array(0)

async function signedHeaders(id: Identity, method: string, target: string, body: Uint8Array<ArrayBuffer>): Promise<Record<string, string>> {
  return headersForHash(id, method, target, await bodyHash(body))
}

/** The three X-M2M-* headers for a body whose SHA-256 (base64url) is `hash`. */
async function headersForHash(id: Identity, method: string, target: string, hash: string): Promise<Record<string, string>> {
  const ts = timestamp()
  return {
    'X-M2M-Public-Key': id.publicKey,
    'X-M2M-Timestamp': ts,
    'X-M2M-Signature': await signText(id, `${method}\n${target}\n${ts}\n${hash}`),
  }
}

/** `path` plus a query string of the given values (empty ones left out), percent-encoded. */
export function withQuery(path: string, query: Record<string, string | string[] | number | undefined | null>): string {
  const parts: string[] = []
  for (const [k, v] of Object.entries(query)) {
    for (const item of Array.isArray(v) ? v : [v]) {
      if (item === undefined || item === null || item === '') continue
      parts.push(`${encodeURIComponent(k)}=${encodeURIComponent(String(item))}`)
    }
  }
  return parts.length ? `${path}?${parts.join('&')}` : path
}

async function failure(res: Response): Promise<ApiError> {
  try {
    const { error } = (await res.json()) as { error: { code: string; message: string; details: unknown } }
    return new ApiError(res.status, error.code, error.message, error.details)
  } catch {
    return new ApiError(res.status, 'http_error', `HTTP ${res.status}`)
  }
}

/** A signed JSON request; resolves with the parsed answer (null for 204), rejects with ApiError. */
export async function call<T = any>(id: Identity, method: string, target: string, body?: unknown): Promise<T> {
  const bytes = body === undefined ? EMPTY : new TextEncoder().encode(JSON.stringify(body))
  const headers = await signedHeaders(id, method, target, bytes)
  if (body !== undefined) headers['Content-Type'] = 'application/json'
  const res = await fetch(target, { method, headers, body: body === undefined ? undefined : bytes, cache: 'no-store' })
  if (!res.ok) throw await failure(res)
  return res.status === 204 ? (null as T) : ((await res.json()) as T)
}

/**
 * Uploads a file (or the ciphertext of one) as a blob, given its SHA-256 (which the signature covers; the
 * caller hashes it in blocks, so the bytes never sit whole in the page); `progress(sent, total)`
 * follows the bytes as they leave.
 */
/**
 * Uploads a blob by a signed POST with progress; resolves the relay's answer with `created` (201: this
 * upload stored it; 200: the agent already owned these bytes). Rejects with ApiError.
 */
export async function upload(id: Identity, file: Blob, sha256: Uint8Array, progress: (sent: number, total: number) => void): Promise<any> {
  const headers = await headersForHash(id, 'POST', '/v1/blobs', b64url(sha256))
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest()
    xhr.open('POST', '/v1/blobs')
    for (const [k, v] of Object.entries(headers)) xhr.setRequestHeader(k, v)
    xhr.setRequestHeader('Content-Type', file.type || 'application/octet-stream')
    xhr.upload.addEventListener('progress', (e) => progress(e.loaded, e.lengthComputable ? e.total : file.size))
    xhr.addEventListener('load', () => {
      let parsed: any = null
      try {
        parsed = JSON.parse(xhr.responseText)
      } catch {
        // not JSON: reported below
      }
      if (xhr.status >= 200 && xhr.status < 300 && parsed) return resolve({ ...parsed, created: xhr.status === 201 })
      const err = parsed?.error
      reject(new ApiError(xhr.status, err?.code ?? 'http_error', err?.message ?? `HTTP ${xhr.status}`, err?.details ?? null))
    })
    xhr.addEventListener('error', () => reject(new ApiError(0, 'network_error', 'The upload did not reach the relay')))
    xhr.send(file)
  })
}

/** A blob's bytes by a signed GET, kept by the browser's blob storage (not the page's heap); rejects with ApiError. */
export async function fetchBlob(id: Identity, blobId: string): Promise<Blob> {
  const target = `/v1/blobs/${encodeURIComponent(blobId)}`
  const res = await fetch(target, { headers: await signedHeaders(id, 'GET', target, EMPTY), cache: 'no-store' })
  if (!res.ok) throw await failure(res)
  return res.blob()
}

/** Downloads a blob with a signed GET and hands it to the browser as a file. */
export async function download(id: Identity, blobId: string, filename: string): Promise<void> {
  saveFile(await fetchBlob(id, blobId), filename || blobId)
}

/** Hands bytes to the browser as a downloaded file. */
export function saveFile(blob: Blob, filename: string): void {
  const url = URL.createObjectURL(blob)
  const a = document.createElement('a')
  a.href = url
  a.download = filename
  document.body.appendChild(a)
  a.click()
  a.remove()
  setTimeout(() => URL.revokeObjectURL(url), 60_000)
}

export interface SocketHandlers {
  onMessage(message: any): void
  onState(state: 'connecting' | 'live' | 'closed', detail?: string): void
}

/**
 * The live inbox: connects to /v1/ws, authenticates, passes pushed messages on and reconnects with
 * backoff (a fresh auth frame each time) until `close` is called.
 */
export class LiveSocket {
  private ws: WebSocket | null = null
  private stopped = false
  private attempt = 0
  private timer: ReturnType<typeof setTimeout> | undefined

  constructor(
    private readonly id: Identity,
    private readonly handlers: SocketHandlers,
  ) {
    this.connect()
  }

  ack(messageId: string): void {
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify({ type: 'ack', message_id: messageId }))
  }

  close(): void {
    this.stopped = true
    clearTimeout(this.timer)
    this.ws?.close(1000)
  }

  private connect(): void {
    if (this.stopped) return
    this.handlers.onState('connecting')
    const ws = new WebSocket(`${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/v1/ws?key=${this.id.publicKey}`)
    this.ws = ws
    ws.addEventListener('open', async () => {
      const ts = timestamp()
      ws.send(JSON.stringify({ type: 'auth', public_key: this.id.publicKey, timestamp: ts, signature: await signText(this.id, `WS\n${ts}`) }))
    })
    ws.addEventListener('message', (e) => {
      let frame: any
      try {
        frame = JSON.parse(String(e.data))
      } catch {
        return
      }
      if (frame.type === 'auth_result') {
        if (frame.status === 'ok') {
          this.attempt = 0
          this.handlers.onState('live')
        } else {
          this.handlers.onState('closed', frame.error?.message ?? 'authentication refused')
        }
      } else if (frame.type === 'message') {
        this.handlers.onMessage(frame.message)
      }
    })
    ws.addEventListener('close', (e) => {
      if (this.ws !== ws) return
      this.ws = null
      // suspended (4003) or deleted (4004): reconnecting cannot help
      const final = e.code === 4003 || e.code === 4004
      this.handlers.onState('closed', e.code === 4003 ? 'this key is suspended' : e.code === 4004 ? 'this agent was deleted' : e.reason || undefined)
      if (this.stopped || final) return
      const delay = Math.min(30_000, 500 * 2 ** this.attempt++)
      this.timer = setTimeout(() => this.connect(), delay)
    })
  }
}
