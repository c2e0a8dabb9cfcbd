/**
 * The WebSocket side of the client (docs/protocol.md, "WebSocket"): one authenticated connection (`RelaySocket`) with acks,
 * sends answered by `send_result` and pings, and `listenLoop`, which keeps a connection open with a
 * fresh auth frame on every reconnect and exponential backoff between attempts.
 */
import { signWsAuth } from '../auth/sign.ts'
import type { MessageJson, SendMessageInput, SendResultJson } from './types.ts'
import { RelayApiError, type Transport } from './transport.ts'

export interface SocketOptions {
  /**
   * The WebSocket constructor; defaults to the runtime's global one (Bun, Node 22+), else to the `ws`
   * package when it is installed (Node 20).
   */
  WebSocket?: WebSocketConstructor
  /** How long to wait for the connection and the auth answer; default 10 s. */
  connectTimeoutMs?: number
}

/**
 * What the client needs of a WebSocket: the standard interface, as Bun, Node 22+ and the `ws` package
 * implement it. Declared here so that the client's types need neither the DOM library nor Node's.
 */
export interface WebSocketLike {
  readonly readyState: number
  send(data: string): void
  close(code?: number, reason?: string): void
  addEventListener(type: 'open' | 'error', listener: (event: unknown) => void): void
  addEventListener(type: 'message', listener: (event: { data: unknown }) => void): void
  addEventListener(type: 'close', listener: (event: { code: number; reason: string }) => void): void
  removeEventListener(type: 'message', listener: (event: { data: unknown }) => void): void
}

export type WebSocketConstructor = new (url: string) => WebSocketLike

export interface SocketClosed {
  code: number
  reason: string
}

/** Auth failures that another attempt cannot fix: listen() gives up on them. */
const FATAL_AUTH = new Set(['unauthorized', 'invalid_signature', 'agent_suspended'])

/** The runtime has no WebSocket and the `ws` package cannot be loaded: listen() and connect() reject with it at once. */
export class NoWebSocketError extends Error {
  override name = 'NoWebSocketError'
}

/**
 * The runtime's WebSocket, or the `ws` package's where there is none (Node 20; the installed package
 * depends on `ws`). The package name is a variable so that bundlers leave the import alone.
 */
export async function webSocketConstructor(opts: SocketOptions): Promise<WebSocketConstructor> {
  if (opts.WebSocket) return opts.WebSocket
  const global = (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket
  if (typeof global === 'function') return global
  const name = 'ws'
  let cause: unknown
  try {
    const mod = (await import(name)) as { WebSocket?: WebSocketConstructor; default?: WebSocketConstructor }
    const Ctor = mod.WebSocket ?? mod.default
    if (Ctor) return Ctor
  } catch (err) {
    cause = err
  }
  throw new NoWebSocketError(
    'this runtime has no WebSocket and the "ws" package cannot be loaded: install it (npm install ws) or pass the WebSocket option',
    { cause },
  )
}

export function wsUrl(baseUrl: string): string {
  return baseUrl.replace(/^http(s?):\/\//i, (_m, s) => `ws${s}://`) + '/v1/ws'
}

/** One authenticated WebSocket connection to the relay. */
export class RelaySocket {
  private handler: ((message: MessageJson) => void) | null = null
  /** Messages pushed before a handler was set (the backlog follows the auth answer at once). */
  private early: MessageJson[] = []
  /** `error` frames (e.g. an ack of an unknown message). */
  onError: (error: { code: string; message: string; details: unknown }) => void = () => {}
  readonly closed: Promise<SocketClosed>
  private nextId = 1
  private readonly pending = new Map<string, { resolve: (r: SendResultJson) => void; reject: (e: Error) => void }>()
  private readonly pongs: { resolve: () => void; reject: (e: Error) => void }[] = []
  private closedInfo: SocketClosed | null = null

  private constructor(private readonly ws: WebSocketLike) {
    this.closed = new Promise((resolve) => {
      ws.addEventListener('close', (e) => {
        this.closedInfo = { code: e.code, reason: e.reason }
        for (const p of this.pending.values()) p.reject(new Error(`connection closed (${e.code})`))
        this.pending.clear()
        for (const p of this.pongs.splice(0)) p.reject(new Error(`connection closed (${e.code})`))
        resolve(this.closedInfo)
      })
    })
  }

  /** Connects and authenticates; rejects with RelayApiError when the relay refuses the auth frame. */
  static async connect(transport: Transport, opts: SocketOptions = {}): Promise<RelaySocket> {
    const Ctor = await webSocketConstructor(opts)
    // the key as a hint: a relay keeps a reserve of handshakes for keys that authenticated before
    const ws = new Ctor(`${wsUrl(transport.baseUrl)}?key=${transport.keys.publicKey}`)
    const socket = new RelaySocket(ws)
    const timeoutMs = opts.connectTimeoutMs ?? 10_000
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        ws.close()
        reject(new Error(`no answer from ${wsUrl(transport.baseUrl)} within ${timeoutMs} ms`))
      }, timeoutMs)
      const fail = (err: Error) => {
        clearTimeout(timer)
        reject(err)
      }
      ws.addEventListener('open', () => ws.send(JSON.stringify(signWsAuth(transport.keys, transport.nextTimestamp()))))
      ws.addEventListener('error', () => fail(new Error(`cannot connect to ${wsUrl(transport.baseUrl)}`)))
      ws.addEventListener('close', (e) => fail(new Error(`connection closed before authentication (${e.code} ${e.reason})`)))
      const first = (e: { data: unknown }) => {
        ws.removeEventListener('message', first)
        clearTimeout(timer)
        let frame: any
        try {
          frame = JSON.parse(String(e.data))
        } catch {
          return fail(new Error('unexpected answer to the auth frame'))
        }
        if (frame?.type === 'auth_result' && frame.status === 'ok') {
          ws.addEventListener('message', (m) => socket.onFrame(m))
          return resolve()
        }
        const err = frame?.error ?? {}
        fail(new RelayApiError(401, err.code ?? 'unauthorized', err.message ?? 'authentication failed', null, null))
      }
      ws.addEventListener('message', first)
    })
    return socket
  }

  /** Each pushed message; ack it with `ack` once handled. Messages already received are replayed to it. */
  set onMessage(handler: (message: MessageJson) => void) {
    this.handler = handler
    for (const m of this.early.splice(0)) handler(m)
  }

  /** Marks a pushed message delivered (idempotent). */
  ack(messageId: string): void {
    this.raw({ type: 'ack', message_id: messageId })
  }

  /** Sends a message over the socket; resolves like POST /v1/messages, rejects with RelayApiError. */
  send(message: SendMessageInput): Promise<SendResultJson> {
    const id = `c${this.nextId++}`
    return new Promise((resolve, reject) => {
      if (this.closedInfo) return reject(new Error('connection closed'))
      this.pending.set(id, { resolve, reject })
      this.raw({ type: 'send', id, message })
    })
  }

  /**
   * Round trip to the relay: resolves on its pong, rejects if the connection closes first. The relay
   * handles frames in order, so every frame sent before the ping has been handled when it resolves.
   */
  ping(): Promise<void> {
    return new Promise((resolve, reject) => {
      if (this.closedInfo) return reject(new Error('connection closed'))
      this.pongs.push({ resolve, reject })
      this.raw({ type: 'ping' })
    })
  }

  close(code = 1000, reason = ''): void {
    this.ws.close(code, reason)
  }

  private raw(frame: unknown): void {
    if (this.ws.readyState === 1) this.ws.send(JSON.stringify(frame))
  }

  private onFrame(e: { data: unknown }): void {
    let frame: any
    try {
      frame = JSON.parse(String(e.data))
    } catch {
      return
    }
    switch (frame?.type) {
      case 'message':
        if (this.handler) return this.handler(frame.message)
        return void this.early.push(frame.message)
      case 'send_result': {
        const p = this.pending.get(String(frame.id))
        if (!p) return
        this.pending.delete(String(frame.id))
        if (frame.error) {
          const { code, message, details } = frame.error
          return p.reject(new RelayApiError(0, code, message, details ?? null, null))
        }
        const { type: _t, id: _id, ...result } = frame
        return p.resolve(result as SendResultJson)
      }
      case 'pong':
        return this.pongs.shift()?.resolve()
      case 'error':
        return this.onError(frame.error)
    }
  }
}

export interface ListenOptions extends SocketOptions {
  /** Called for each pushed message, one at a time, in order. */
  onMessage: (message: MessageJson, socket: RelaySocket) => unknown | Promise<unknown>
  /** Ack each message once onMessage resolved (default true); a message whose handler throws stays `sent`. */
  autoAck?: boolean
  /** Stops listening: the socket is closed and listen() resolves. */
  signal?: AbortSignal
  onConnect?: (socket: RelaySocket) => void
  /** After a connection ends or an attempt fails, before waiting `retryInMs`. */
  onDisconnect?: (info: { code?: number; reason?: string; error?: Error; retryInMs: number }) => void
  /** A handler that threw, or an `error` frame from the relay. */
  onError?: (error: unknown) => void
  minBackoffMs?: number
  maxBackoffMs?: number
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms)
    signal?.addEventListener('abort', () => {
      clearTimeout(timer)
      resolve()
    }, { once: true })
  })
}

/**
 * Keeps a connection open until `signal` aborts, reconnecting with exponential backoff (with jitter)
 * and a fresh auth frame each time. Rejects only for auth failures another attempt cannot fix.
 */
export async function listenLoop(transport: Transport, opts: ListenOptions): Promise<void> {
  const min = opts.minBackoffMs ?? 500
  const max = opts.maxBackoffMs ?? 30_000
  let backoff = min
  // resolved once, before the loop: a runtime without WebSocket fails here rather than retrying forever
  const connectOpts = { ...opts, WebSocket: await webSocketConstructor(opts) }
  while (!opts.signal?.aborted) {
    let socket: RelaySocket
    try {
      socket = await RelaySocket.connect(transport, connectOpts)
    } catch (err) {
      if (err instanceof RelayApiError && FATAL_AUTH.has(err.code)) throw err
      if (opts.signal?.aborted) return
      const retryInMs = Math.round(backoff * (0.8 + Math.random() * 0.4))
      opts.onDisconnect?.({ error: err as Error, retryInMs })
      await sleep(retryInMs, opts.signal)
      backoff = Math.min(max, backoff * 2)
      continue
    }
    if (opts.signal?.aborted) {
      // aborted while connecting: the abort listener below would never fire
      socket.close(1000, 'done')
      return
    }
    backoff = min
    let chain = Promise.resolve()
    socket.onMessage = (message) => {
      chain = chain.then(async () => {
        try {
          await opts.onMessage(message, socket)
          if (opts.autoAck !== false) socket.ack(message.message_id)
        } catch (err) {
          opts.onError?.(err)
        }
      })
    }
    socket.onError = (e) => opts.onError?.(new RelayApiError(0, e.code, e.message, e.details, null))
    opts.onConnect?.(socket)
    // a handler that stops listening still gets its message acked: close once the chain has run
    const onAbort = () => void chain.then(() => socket.close(1000, 'done'))
    opts.signal?.addEventListener('abort', onAbort, { once: true })
    const closed = await socket.closed
    opts.signal?.removeEventListener('abort', onAbort)
    await chain
    if (opts.signal?.aborted) return
    const retryInMs = Math.round(backoff * (0.8 + Math.random() * 0.4))
    opts.onDisconnect?.({ ...closed, retryInMs })
    await sleep(retryInMs, opts.signal)
    backoff = Math.min(max, backoff * 2)
  }
}
