/**
 * The WebSocket hub (docs/protocol.md §8): Bun's native WebSocket handlers for `/v1/ws` (frames are parsed here,
 * never by a framework), authentication within the auth window, the per-agent connection limit, client
 * frames (ack, send, ping), pushes after each commit, keepalive pings, and closing an agent's sockets
 * when it is suspended or deleted, or every socket when the relay stops.
 */
import type { Server, ServerWebSocket, WebSocketHandler } from 'bun'
import { RelayError, type ErrorCode } from '../errors.ts'
import type { Clock } from '../lib/clock.ts'
import { stringifyJson } from '../lib/json-text.ts'
import { pathOnly } from '../lib/url.ts'
import type { Logger } from '../lib/logger.ts'
import { clientAddressOf, type PreAuthBudget, type PreAuthHold } from '../http/preauth.ts'
import type { Authenticator } from '../services/authenticator.ts'
import { messageToJson } from '../services/messages-json.ts'
import type { MessagesService } from '../services/messages.ts'
import type { ConnectionRegistry, Signals } from '../services/ports.ts'
import type { MessageRecord } from '../services/models/records.ts'
import { Connection, type PushSource } from './ws-connection.ts'
import { CLOSE, frames, parseClientFrame, type ClientFrame } from './ws-frames.ts'

export const WS_PATH = '/v1/ws'
/** docs/protocol.md §8: inbound frames up to 2 MiB; larger ones close the connection with 1009. */
export const MAX_FRAME_BYTES = 2 * 1024 * 1024
/** Bytes Bun may queue per socket; pushes stop at the first queued frame, so this is rarely reached. */
const BACKPRESSURE_LIMIT = 4 * 1024 * 1024
/** Frames (and their bytes) accepted while the auth frame is being checked; a client that floods is cut off. */
const MAX_EARLY_FRAMES = 64
const MAX_EARLY_BYTES = MAX_FRAME_BYTES
/** The largest first frame: an auth frame is a few hundred bytes; anything bigger fails authentication. */
export const MAX_AUTH_FRAME_BYTES = 4096
/**
 * What an unauthenticated socket is counted as against the pre-auth memory budget: room for its auth
 * frame, all a well-behaved client sends before authenticating. A silent socket costs a connection and
 * this, not a whole frame; how many a stranger may hold is capped by count (per address and relay-wide),
 * which is what bounds the unfinished frames the runtime may buffer unseen.
 */
const PREAUTH_SOCKET_BYTES = MAX_AUTH_FRAME_BYTES
/** Unauthenticated sockets one client address may hold at once (beyond it: 429). */
export const DEFAULT_PREAUTH_SOCKETS_PER_ADDRESS = 4
/**
 * Unauthenticated sockets over all clients (beyond it: 503). The runtime accepts frames of up to 2 MiB
 * from any socket and buffers one still arriving where the hub cannot see it, so this count is what
 * bounds that memory: 128 × 2 MiB at worst (measured: about 2 MiB of RSS per socket stalled in a frame).
 */
export const DEFAULT_PREAUTH_SOCKETS = 128
/** The share of the relay-wide count that only handshakes naming a key known here may use. */
const KNOWN_KEY_RESERVE = 0.25
/** Keys remembered as known (they authenticated a socket here), oldest forgotten first. */
const KNOWN_KEYS_MAX = 100_000
/** How long a graceful stop waits for clients to answer the close frame. */
const CLOSE_GRACE_MS = 1000

export interface HubOptions {
  maxConnections: number
  pingIntervalMs: number
  authTimeoutMs: number
  /** Unauthenticated sockets per client address (default DEFAULT_PREAUTH_SOCKETS_PER_ADDRESS; 0 = no cap). */
  preauthSocketsPerAddress?: number
  /** Unauthenticated sockets relay-wide (default DEFAULT_PREAUTH_SOCKETS; 0 = no cap), a quarter kept for known keys. */
  preauthSockets?: number
}

export interface HubDeps {
  authenticator: Authenticator
  messages: MessagesService
  signals: Signals
  /** Counts connections per agent (over every instance in a cluster) for the per-agent limit. */
  connections: ConnectionRegistry
  clock: Clock
  logger: Logger
  /** A message became delivered by an ack on a socket (metrics). */
  onDelivered?: () => void
  /** Request rate per address and memory for unauthenticated sockets; none: unbounded (tests). */
  preauth?: PreAuthBudget
}

interface SocketData {
  conn: Connection | null
  /** Budget held until the socket authenticates or closes. */
  hold?: PreAuthHold
  /** The client address per-address limits count (null: exempt or in process). */
  address?: string | null
  /** Whether the socket still counts as unauthenticated (released once: on auth or close). */
  pending?: boolean
}

const byteLength = (data: string | Uint8Array) => (typeof data === 'string' ? Buffer.byteLength(data) : data.byteLength)

type Socket = ServerWebSocket<SocketData>

function asRelayError(err: unknown): RelayError {
  return err instanceof RelayError ? err : new RelayError('internal_error', 'Internal error')
}

export class SocketHub {
  private readonly byAgent = new Map<string, Set<Connection>>()
  private readonly sockets = new Map<Connection, Socket>()
  private nextId = 1
  private closing = false
  private pingTimer: ReturnType<typeof setInterval> | undefined
  private allClosed: (() => void) | null = null
  private readonly source: PushSource
  /** Unauthenticated sockets per client address, and over all clients. */
  private readonly pendingBy = new Map<string, number>()
  private pendingTotal = 0
  /** Keys that authenticated a socket here (insertion order = least recently seen first). */
  private readonly knownKeys = new Map<string, true>()

  constructor(
    private readonly deps: HubDeps,
    private readonly opts: HubOptions,
  ) {
    const { messages, clock } = deps
    this.source = {
      backlog: (key, after, limit) =>
        messages.pendingFor(key, after ? { afterCreatedAt: after.createdAt, afterId: after.messageId, limit } : { limit }),
      find: (id) => messages.findRow(id),
      frame: (row) => frames.message(stringifyJson(messageToJson(row, clock.now()))),
      onError: (err) => deps.logger.warn('websocket backlog read failed', { error: String(err) }),
      now: () => clock.now(),
    }
    deps.signals.onMessage((message) => this.announce(message))
    deps.signals.wantRecipients((recipientKey) => this.byAgent.has(recipientKey))
    deps.signals.onAgentGone((publicKey, reason) =>
      this.closeAgent(publicKey, reason === 'suspended' ? CLOSE.suspended : CLOSE.deleted, reason === 'suspended' ? 'agent suspended' : 'agent deleted'),
    )
    // notices may have been lost (a cluster link dropped): every connection reads its backlog again
    deps.signals.onResync(() => {
      for (const set of this.byAgent.values()) for (const conn of set) conn.resync()
    })
  }

  /** Bun.serve `websocket` handlers. */
  readonly websocket: WebSocketHandler<SocketData> = {
    maxPayloadLength: MAX_FRAME_BYTES,
    backpressureLimit: BACKPRESSURE_LIMIT,
    // keepalive is the hub's own ping timer (pingIntervalMs), so Bun's idle timeout is off
    idleTimeout: 0,
    sendPings: false,
    perMessageDeflate: false,
    open: (ws) => this.onOpen(ws),
    message: (ws, data) => {
      try {
        this.onMessage(ws, data)
      } catch (err) {
        this.deps.logger.error('websocket frame failed', { error: String(err), stack: (err as Error)?.stack })
        ws.data.conn?.reply(frames.error('internal_error', 'Internal error'))
      }
    },
    drain: (ws) => ws.data.conn?.drained(),
    pong: (ws) => {
      if (ws.data.conn) ws.data.conn.alive = true
    },
    close: (ws, code) => this.onClose(ws, code),
    error: (err) => this.deps.logger.error('websocket handler failed', { error: String(err) }),
  }

  /**
   * For Bun.serve's fetch: upgrades a WebSocket handshake on /v1/ws. Returns null when the request is
   * not one (the HTTP pipeline answers it), true when upgraded, or the error to answer with.
   */
  upgrade(request: Request, server: Server<SocketData>): true | RelayError | null {
    if (request.headers.get('upgrade')?.toLowerCase() !== 'websocket') return null
    if (pathOnly(request.url) !== WS_PATH) return null
    if (this.closing) return new RelayError('service_unavailable', 'The relay is stopping')
    const address = clientAddressOf(request)
    const refused = this.takePending(address, this.namesKnownKey(request.url))
    if (refused) return refused
    // the address's request rate and room for the auth frame, before upgrading
    let hold: PreAuthHold | undefined
    try {
      this.deps.preauth?.admit(address)
      hold = this.deps.preauth?.open(address, 'socket')
      hold?.take(PREAUTH_SOCKET_BYTES)
    } catch (err) {
      hold?.release()
      this.givePending(address)
      return asRelayError(err)
    }
    if (server.upgrade(request, { data: { conn: null, hold, address, pending: true } })) return true
    hold?.release()
    this.givePending(address)
    return new RelayError('bad_request', 'Invalid WebSocket handshake')
  }

  /** Unauthenticated sockets right now: over all clients, and of one address (tests, health). */
  pendingSockets(address?: string): number {
    return address === undefined ? this.pendingTotal : (this.pendingBy.get(address) ?? 0)
  }

  /**
   * A handshake may name its key (`/v1/ws?key=<public key>`, a hint only: authentication is still the
   * auth frame). A key that authenticated a socket here before may use the reserve strangers cannot.
   */
  private namesKnownKey(url: string): boolean {
    const q = url.indexOf('?key=') >= 0 ? url.indexOf('?key=') : url.indexOf('&key=')
    if (q < 0) return false
    const start = q + 5
    const end = url.indexOf('&', start)
    // public keys are base64url: nothing to decode, and anything else is not a known key
    return this.knownKeys.has(url.slice(start, end < 0 ? undefined : end))
  }

  /** Counts one unauthenticated socket, or returns why not (429 for the address, 503 for the relay). */
  private takePending(address: string | null, known: boolean): RelayError | null {
    const perAddress = this.opts.preauthSocketsPerAddress ?? DEFAULT_PREAUTH_SOCKETS_PER_ADDRESS
    const total = this.opts.preauthSockets ?? DEFAULT_PREAUTH_SOCKETS
    const mine = address === null ? 0 : (this.pendingBy.get(address) ?? 0)
    if (address !== null && perAddress > 0 && mine >= perAddress) {
      return new RelayError(
        'rate_limit_exceeded',
        `Too many unauthenticated WebSockets from your address: at most ${perAddress}; authenticate or retry shortly`,
        { limit: perAddress, retry_after: 1 },
        { 'Retry-After': '1' },
      )
    }
    const ceiling = known ? total : Math.floor(total * (1 - KNOWN_KEY_RESERVE))
    if (total > 0 && this.pendingTotal >= ceiling) {
      return new RelayError('service_unavailable', 'The relay is busy; retry shortly', { retry_after: 1 }, { 'Retry-After': '1' })
    }
    this.pendingTotal++
    if (address !== null) this.pendingBy.set(address, mine + 1)
    return null
  }

  private givePending(address: string | null): void {
    this.pendingTotal--
    if (address === null) return
    const left = (this.pendingBy.get(address) ?? 0) - 1
    if (left > 0) this.pendingBy.set(address, left)
    else this.pendingBy.delete(address)
  }

  /** The socket no longer counts as unauthenticated: its budget and its place in the counts go back. */
  private settle(ws: Socket): void {
    ws.data.hold?.release()
    // nothing of the handshake stays referenced by a socket that may live for days
    ws.data.hold = undefined
    if (!ws.data.pending) return
    ws.data.pending = false
    this.givePending(ws.data.address ?? null)
    ws.data.address = undefined
  }

  private rememberKey(publicKey: string): void {
    this.knownKeys.delete(publicKey)
    this.knownKeys.set(publicKey, true)
    if (this.knownKeys.size > KNOWN_KEYS_MAX) this.knownKeys.delete(this.knownKeys.keys().next().value as string)
  }

  /** Authenticated connections (metrics, health). */
  get authenticatedCount(): number {
    let n = 0
    for (const set of this.byAgent.values()) n += set.size
    return n
  }

  /** Health figures: sockets, and how many wait for a slow reader (with the bytes queued for them). */
  report() {
    let congested = 0
    let buffered = 0
    for (const [conn, ws] of this.sockets) {
      if (conn.isCongested) congested++
      buffered += ws.getBufferedAmount()
    }
    return {
      status: 'ok' as const,
      open_sockets: this.sockets.size,
      authenticated: this.authenticatedCount,
      unauthenticated: this.pendingTotal,
      agents: this.byAgent.size,
      slow_consumers: congested,
      buffered_bytes: buffered,
    }
  }

  /** Connections of one agent (tests). */
  connectionsOf(publicKey: string): Connection[] {
    return [...(this.byAgent.get(publicKey) ?? [])]
  }

  /**
   * Graceful stop: refuses new sockets and closes every open one with 1001; resolves once they are
   * closed, or after a short grace, when those that did not answer are cut.
   */
  async closeAll(): Promise<void> {
    this.closing = true
    clearInterval(this.pingTimer)
    this.pingTimer = undefined
    if (this.sockets.size === 0) return
    const closed = new Promise<void>((resolve) => (this.allClosed = resolve))
    for (const [conn, ws] of this.sockets) {
      conn.state = 'closed'
      ws.close(CLOSE.goingAway, 'relay stopping')
    }
    const timer = setTimeout(() => {
      for (const ws of this.sockets.values()) ws.terminate()
    }, CLOSE_GRACE_MS)
    await closed
    clearTimeout(timer)
  }

  // --- socket events ---

  private onOpen(ws: Socket): void {
    if (this.closing) return ws.close(CLOSE.goingAway, 'relay stopping')
    const conn = new Connection(this.nextId++, ws, this.source)
    ws.data.conn = conn
    this.sockets.set(conn, ws)
    conn.authTimer = setTimeout(() => {
      if (conn.state === 'new' || conn.state === 'authenticating') {
        conn.state = 'closed'
        ws.close(CLOSE.authTimeout, 'no auth frame in time')
      }
    }, this.opts.authTimeoutMs)
    this.startPings()
  }

  private onClose(ws: Socket, code: number): void {
    this.settle(ws)
    const conn = ws.data.conn
    if (!conn) return
    ws.data.conn = null
    const wasOpen = conn.agent !== null
    conn.state = 'closed'
    clearTimeout(conn.authTimer)
    this.sockets.delete(conn)
    if (wasOpen) {
      this.release(conn, conn.publicKey)
      const set = this.byAgent.get(conn.publicKey)
      set?.delete(conn)
      if (set?.size === 0) this.byAgent.delete(conn.publicKey)
      if (this.deps.logger.enabled('debug')) this.deps.logger.debug('websocket closed', { agent: conn.publicKey, code })
    }
    if (this.sockets.size === 0) {
      this.allClosed?.()
      this.allClosed = null
    }
  }

  private onMessage(ws: Socket, data: string | Uint8Array): void {
    const conn = ws.data.conn
    if (!conn) return
    conn.alive = true
    switch (conn.state) {
      case 'new':
        if (byteLength(data) > MAX_AUTH_FRAME_BYTES) {
          // like any first frame that is not an auth frame: an auth_result error, then 4001
          return this.failAuth(conn, ws, new RelayError('unauthorized', `The first frame must be an auth frame of at most ${MAX_AUTH_FRAME_BYTES} bytes`))
        }
        return this.onFirstFrame(conn, ws, data)
      case 'authenticating': {
        const n = byteLength(data)
        conn.earlyBytes += n
        let held = (conn.early?.length ?? 0) < MAX_EARLY_FRAMES && conn.earlyBytes <= MAX_EARLY_BYTES
        try {
          if (held) ws.data.hold?.take(n)
        } catch {
          held = false
        }
        if (!held) {
          conn.state = 'closed'
          return ws.close(CLOSE.policy, 'too many frames before authentication')
        }
        ;(conn.early ??= []).push(data)
        return
      }
      case 'open':
        return this.onFrame(conn, data)
    }
  }

  /** docs/protocol.md §8.1–2: the first frame must be a valid auth frame; anything else fails authentication. */
  private onFirstFrame(conn: Connection, ws: Socket, data: string | Uint8Array): void {
    let frame: ClientFrame | null = null
    try {
      frame = parseClientFrame(data)
    } catch {
      // malformed: an authentication failure like any other first frame
    }
    if (frame?.type !== 'auth') return this.failAuth(conn, ws, new RelayError('unauthorized', 'The first frame must be an auth frame'))
    conn.state = 'authenticating'
    const input = { publicKey: frame.public_key, timestamp: frame.timestamp, signature: frame.signature, address: ws.data.address ?? null }
    // authenticateWs throws synchronously for malformed input: run it inside the promise chain
    const admit = async (i: typeof input) => {
      const agent = await this.deps.authenticator.authenticateWs(i)
      const max = this.opts.maxConnections
      if (!(await this.deps.connections.tryAdd(agent.publicKey, String(conn.id), max, this.deps.clock.now()))) {
        throw new RelayError('rate_limit_exceeded', `At most ${max} WebSocket connections per agent`, { limit: max })
      }
      conn.registered = true
      return agent
    }
    Promise.resolve(input).then(admit).then(
      (agent) => {
        if (conn.state !== 'authenticating') return this.release(conn, agent.publicKey)
        if (this.closing) {
          conn.state = 'closed'
          this.release(conn, agent.publicKey)
          return ws.close(CLOSE.goingAway, 'relay stopping')
        }
        const set = this.byAgent.get(agent.publicKey) ?? new Set<Connection>()
        clearTimeout(conn.authTimer)
        conn.authTimer = undefined
        set.add(conn)
        this.byAgent.set(agent.publicKey, set)
        conn.reply(frames.authOk(agent.publicKey))
        if (this.deps.logger.enabled('debug')) this.deps.logger.debug('websocket authenticated', { agent: agent.publicKey, connection: conn.id })
        conn.open(agent)
        const early = conn.early
        conn.early = null
        if (early) for (const f of early) if (conn.isOpen) this.onFrame(conn, f)
        this.settle(ws)
        this.rememberKey(agent.publicKey)
      },
      (err) => {
        if (!(err instanceof RelayError)) this.deps.logger.error('websocket authentication failed unexpectedly', { error: String(err) })
        if (conn.state === 'authenticating') this.failAuth(conn, ws, asRelayError(err))
      },
    )
  }

  private failAuth(conn: Connection, ws: Socket, err: RelayError): void {
    this.settle(ws)
    conn.state = 'closed'
    clearTimeout(conn.authTimer)
    ws.send(frames.authError(err.code, err.message))
    ws.close(CLOSE.authFailed, err.code)
  }

  /** docs/protocol.md §8.4: frames after auth; a bad one gets an error frame and the connection stays. */
  private onFrame(conn: Connection, data: string | Uint8Array): void {
    conn.answer(this.answerFrame(conn, data))
  }

  /** The answer to one frame (null: none), at once or once its work is done. */
  private answerFrame(conn: Connection, data: string | Uint8Array): string | null | Promise<string | null> {
    let frame: ClientFrame
    try {
      frame = parseClientFrame(data)
    } catch (err) {
      const e = asRelayError(err)
      return frames.error(e.code, e.message, e.details)
    }
    switch (frame.type) {
      case 'ping':
        return frames.pong()
      case 'auth':
        return frames.error('bad_request', 'Already authenticated')
      case 'ack':
        return this.ack(conn, frame.message_id)
      case 'send':
        return this.send(conn, frame.id, frame.message)
    }
  }

  private async ack(conn: Connection, messageId: string): Promise<string | null> {
    try {
      const { changed } = await this.deps.messages.ack(conn.publicKey, messageId)
      if (changed) this.deps.onDelivered?.()
      return null
    } catch (err) {
      if (!(err instanceof RelayError)) this.deps.logger.error('websocket ack failed unexpectedly', { error: String(err) })
      const e = asRelayError(err)
      return frames.error(e.code as ErrorCode, e.message, { message_id: messageId })
    }
  }

  /** docs/protocol.md §8.4: the checks, limits and rate limit of POST /v1/messages, answered by send_result. */
  private async send(conn: Connection, id: unknown, message: unknown): Promise<string> {
    try {
      const { rate: _rate, ...result } = await this.deps.messages.send(conn.agent!, message)
      return frames.sendOk(id, result)
    } catch (err) {
      if (!(err instanceof RelayError)) this.deps.logger.error('websocket send failed unexpectedly', { error: String(err), stack: (err as Error)?.stack })
      const e = asRelayError(err)
      return frames.sendError(id, e.code, e.message, e.details)
    }
  }

  // --- pushes and closes ---

  /** After a commit: the committed message to every connection of its recipient (docs/protocol.md §8.3). */
  private announce(row: MessageRecord): void {
    const set = this.byAgent.get(row.recipientKey)
    if (!set) return
    const now = this.deps.clock.now()
    if (row.status !== 'sent' || row.expiresAt <= now) return
    const text = frames.message(stringifyJson(messageToJson(row, now)))
    for (const conn of set) conn.offer(row, text)
  }

  /** Gives back the connection's place in the per-agent count. */
  private release(conn: Connection, publicKey: string): void {
    if (!conn.registered) return
    conn.registered = false
    this.deps.connections.remove(publicKey, String(conn.id)).catch((err) => this.deps.logger.warn('websocket count update failed', { error: String(err) }))
  }

  private closeAgent(publicKey: string, code: number, reason: string): void {
    const set = this.byAgent.get(publicKey)
    if (!set) return
    for (const conn of set) {
      conn.state = 'closed'
      this.sockets.get(conn)?.close(code, reason)
    }
  }

  /** Keepalive (docs/protocol.md §8.5): a ping every interval; a socket silent since the last one is cut. */
  private startPings(): void {
    if (this.pingTimer || this.closing) return
    this.pingTimer = setInterval(() => {
      for (const [conn, ws] of this.sockets) {
        if (!conn.alive) {
          ws.terminate()
          continue
        }
        conn.alive = false
        ws.ping()
      }
    }, this.opts.pingIntervalMs)
    this.pingTimer.unref?.()
  }

  /** Stops the keepalive timer (when the last socket is gone on stop). */
  stopPings(): void {
    clearInterval(this.pingTimer)
    this.pingTimer = undefined
  }
}
