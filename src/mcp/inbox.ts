/**
 * The bridge's pending inbox: messages received and not yet acknowledged. The relay's queue is the
 * truth; this is a view of it kept by the relay's WebSocket, which pushes every `sent` message on each
 * connection and each new one after, and leaves them `sent` until an `ack` frame. So a restarted bridge
 * loses nothing (un-acked messages are pushed again), reading the inbox never changes it, and the only
 * way out of it is ack().
 *
 * The bridge never polls GET /v1/messages: a poll marks what it returns delivered, so a poll would take
 * messages out of the relay's queue that no one has handled yet. When the socket cannot be opened the
 * bridge keeps retrying with backoff and says so (status()); messages wait on the relay meanwhile.
 */
import { RelayApiError, wsUrl, type MessageJson, type RelayClient, type RelaySocket } from '../client/index.ts'

/** How long a read waits for a new connection's first backlog before it answers (or asks the relay directly). */
export const SYNC_WAIT_MS = 3000

export type ConnectionStateName = 'connecting' | 'connected' | 'disconnected' | 'refused'

export interface ConnectionState {
  state: ConnectionStateName
  websocket_url: string
  since: string
  synced: boolean
  last_error?: string
  retry_in_s?: number
  note?: string
}

export interface InboxFilter {
  from?: string
  thread_id?: string
  in_reply_to?: string
}

export interface InboxPage {
  messages: MessageJson[]
  pending_count: number
  has_more: boolean
  next_cursor: string | null
}

export interface AckOutcome {
  /** Delivered on the relay now (or already): gone from the pending set. */
  acked: string[]
  /** Unknown to the relay, or not addressed to this agent: gone from the pending set too. */
  not_found: string[]
  /** Not acknowledged (the relay could not be asked): still pending. */
  failed: { message_id: string; error: string }[]
  via: 'websocket' | 'http'
  pending_count: number
}

export interface InboxOptions {
  minBackoffMs?: number
  maxBackoffMs?: number
  /** After an auth refusal (e.g. a suspended agent), how long until trying again. */
  refusedRetryMs?: number
  /** One line per change of connection state (standard error of `relay mcp`). */
  log?: (line: string) => void
  now?: () => number
}

interface Entry {
  message: MessageJson
  /** The connection that last pushed it. */
  generation: number
}

interface Waiter {
  filter: InboxFilter
  resolve: (m: MessageJson) => void
}

/** Ids acknowledged lately, so a push that crossed the ack on the wire does not bring one back. */
const RECENT_ACKS = 1024
const ACK_ROUND_TRIP_MS = 10_000

const byAge = (a: MessageJson, b: MessageJson) =>
  a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : a.message_id < b.message_id ? -1 : a.message_id > b.message_id ? 1 : 0

export function matches(m: MessageJson, f: InboxFilter): boolean {
  return (!f.from || m.sender_key === f.from) && (!f.thread_id || m.thread_id === f.thread_id) && (!f.in_reply_to || m.in_reply_to === f.in_reply_to)
}

function encodeCursor(m: MessageJson): string {
  return Buffer.from(JSON.stringify([m.created_at, m.message_id])).toString('base64url')
}

function decodeCursor(cursor: string): [string, string] {
  try {
    const value = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'))
    if (Array.isArray(value) && value.length === 2 && value.every((v) => typeof v === 'string')) return value as [string, string]
  } catch {
    // reported below
  }
  throw new Error('invalid cursor: pass next_cursor of a previous relay_inbox answer')
}

export class PendingInbox {
  private readonly pending = new Map<string, Entry>()
  private readonly recentAcks: string[] = []
  private readonly waiters = new Set<Waiter>()
  private readonly arrivalListeners = new Set<(m: MessageJson) => void>()
  private readonly ackErrors = new Set<(e: RelayApiError) => void>()
  private syncWaiters: ((synced: boolean) => void)[] = []
  private socket: RelaySocket | null = null
  private generation = 0
  private synced = false
  private state: ConnectionState
  private readonly stop = new AbortController()
  private running: Promise<void> | null = null
  private readonly now: () => number

  constructor(
    private readonly client: RelayClient,
    private readonly opts: InboxOptions = {},
  ) {
    this.now = opts.now ?? Date.now
    this.state = { state: 'connecting', websocket_url: wsUrl(client.transport.baseUrl), since: this.iso(), synced: false }
  }

  /** Starts receiving (in the background) until close(). */
  start(): void {
    this.running ??= this.run()
  }

  async close(): Promise<void> {
    this.stop.abort()
    for (const w of this.waiters) this.waiters.delete(w)
    await this.running
  }

  /** The connection as a person or a model should read it. */
  status(): ConnectionState {
    const s = { ...this.state, synced: this.synced }
    if (s.state !== 'connected') {
      s.note =
        `Not connected to the relay's WebSocket (${s.websocket_url}); retrying${s.retry_in_s !== undefined ? ` in ${s.retry_in_s} s` : ''}. ` +
        'Messages sent to you meanwhile wait on the relay and are not lost: they appear here once the socket connects. ' +
        'The bridge does not poll instead, because a poll marks messages delivered before anyone has handled them.'
    }
    return s
  }

  /**
   * Resolves true once the current connection has received the backlog it started with; false on
   * timeout, or at once (or as soon as an attempt fails) when there is no connection to wait for.
   */
  whenSynced(timeoutMs = SYNC_WAIT_MS): Promise<boolean> {
    if (this.synced) return Promise.resolve(true)
    if (this.state.state === 'disconnected' || this.state.state === 'refused') return Promise.resolve(false)
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.syncWaiters = this.syncWaiters.filter((w) => w !== done)
        resolve(false)
      }, timeoutMs)
      const done = (ok: boolean) => {
        clearTimeout(timer)
        resolve(ok)
      }
      this.syncWaiters.push(done)
    })
  }

  get count(): number {
    this.dropExpired()
    return this.pending.size
  }

  get(messageId: string): MessageJson | undefined {
    this.dropExpired()
    return this.pending.get(messageId)?.message
  }

  /** Pending messages, oldest first, a page at a time; reading changes nothing. */
  list(opts: InboxFilter & { limit?: number; cursor?: string } = {}): InboxPage {
    this.dropExpired()
    const after = opts.cursor ? decodeCursor(opts.cursor) : null
    const limit = opts.limit ?? 20
    const all = [...this.pending.values()].map((e) => e.message).filter((m) => matches(m, opts)).sort(byAge)
    const from = after ? all.filter((m) => m.created_at > after[0] || (m.created_at === after[0] && m.message_id > after[1])) : all
    const messages = from.slice(0, limit)
    const has_more = from.length > limit
    return { messages, pending_count: this.pending.size, has_more, next_cursor: has_more ? encodeCursor(messages[messages.length - 1]) : null }
  }

  /** Called with each message that joins the pending set (not with one pushed again after a reconnect). */
  onArrival(listener: (m: MessageJson) => void): () => void {
    this.arrivalListeners.add(listener)
    return () => this.arrivalListeners.delete(listener)
  }

  /**
   * The oldest pending message that matches (unless `newOnly`), else the first matching one to arrive
   * within `timeoutMs`; null on timeout or abort. Nothing is acknowledged.
   */
  async wait(filter: InboxFilter, opts: { timeoutMs: number; newOnly?: boolean; signal?: AbortSignal }): Promise<MessageJson | null> {
    if (!opts.newOnly) {
      await this.whenSynced(Math.min(opts.timeoutMs, SYNC_WAIT_MS))
      const first = this.list({ ...filter, limit: 1 }).messages[0]
      if (first) return first
    }
    if (opts.signal?.aborted || this.stop.signal.aborted) return null
    return new Promise((resolve) => {
      const finish = (m: MessageJson | null) => {
        clearTimeout(timer)
        this.waiters.delete(waiter)
        opts.signal?.removeEventListener('abort', onAbort)
        this.stop.signal.removeEventListener('abort', onAbort)
        resolve(m)
      }
      const waiter: Waiter = { filter, resolve: finish }
      const timer = setTimeout(() => finish(null), opts.timeoutMs)
      const onAbort = () => finish(null)
      opts.signal?.addEventListener('abort', onAbort, { once: true })
      this.stop.signal.addEventListener('abort', onAbort, { once: true })
      this.waiters.add(waiter)
    })
  }

  /**
   * Acknowledges messages: `ack` frames on the socket, then a ping, whose pong comes after the relay
   * has handled them (and answered any it refused). Without a socket, GET /v1/messages/{id}, which marks
   * a message delivered when its recipient reads it.
   */
  async ack(ids: string[]): Promise<AckOutcome> {
    const unique = [...new Set(ids)]
    const socket = this.socket
    if (socket) {
      const refused = new Map<string, RelayApiError>()
      const collect = (e: RelayApiError) => {
        const id = (e.details as { message_id?: unknown } | null)?.message_id
        if (typeof id === 'string' && unique.includes(id)) refused.set(id, e)
      }
      this.ackErrors.add(collect)
      try {
        for (const id of unique) socket.ack(id)
        await withTimeout(socket.ping(), ACK_ROUND_TRIP_MS)
        return this.settle(unique, refused, 'websocket')
      } catch {
        // the socket went away before the relay confirmed: ask over HTTP instead
      } finally {
        this.ackErrors.delete(collect)
      }
    }
    return this.ackOverHttp(unique)
  }

  // --- receiving ---

  private async run(): Promise<void> {
    const log = this.opts.log ?? (() => {})
    while (!this.stop.signal.aborted) {
      try {
        await this.client.listen({
          signal: this.stop.signal,
          autoAck: false,
          minBackoffMs: this.opts.minBackoffMs ?? 500,
          maxBackoffMs: this.opts.maxBackoffMs ?? 30_000,
          onConnect: (socket) => this.connected(socket, log),
          onMessage: (message) => this.received(message),
          onDisconnect: (info) => {
            this.socket = null
            this.synced = false
            const error = info.error ? info.error.message : `connection closed (${info.code}${info.reason ? ` ${info.reason}` : ''})`
            this.setState({ state: 'disconnected', last_error: error, retry_in_s: Math.round(info.retryInMs / 100) / 10 })
            log(`${error}; reconnecting in ${(info.retryInMs / 1000).toFixed(1)} s`)
          },
          onError: (err) => {
            if (err instanceof RelayApiError) for (const collect of this.ackErrors) collect(err)
          },
        })
      } catch (err) {
        // the relay refused the auth frame in a way another attempt cannot fix right away
        const retryMs = this.opts.refusedRetryMs ?? 60_000
        const message = (err as Error)?.message ?? String(err)
        this.setState({ state: 'refused', last_error: message, retry_in_s: retryMs / 1000 })
        log(`the relay refused this agent's WebSocket: ${message}; trying again in ${retryMs / 1000} s`)
        await abortableSleep(retryMs, this.stop.signal)
      }
    }
  }

  private connected(socket: RelaySocket, log: (line: string) => void): void {
    // closed while this socket was still connecting: the listen loop only hears of aborts after this
    if (this.stop.signal.aborted) {
      socket.close(1000, 'done')
      return
    }
    const generation = ++this.generation
    this.socket = socket
    this.synced = false
    this.setState({ state: 'connected' })
    log(`receiving on ${this.state.websocket_url}`)
    // the relay pushes the first page of the backlog before it answers a ping sent after auth
    socket
      .ping()
      .then(() => {
        if (this.generation !== generation) return
        this.synced = true
        for (const done of this.syncWaiters.splice(0)) done(true)
        return this.reconcile(generation)
      })
      .catch(() => {})
  }

  private received(message: MessageJson): void {
    if (this.recentAcks.includes(message.message_id)) return
    const known = this.pending.has(message.message_id)
    this.pending.set(message.message_id, { message, generation: this.generation })
    if (known) return
    for (const w of [...this.waiters]) if (matches(message, w.filter)) w.resolve(message)
    for (const listener of this.arrivalListeners) listener(message)
  }

  /**
   * After a reconnect, messages held from before that the relay did not push again may have been
   * delivered meanwhile (read by id elsewhere, a webhook, another client's ack) or have expired: the
   * status endpoint, which changes nothing, says which are still `sent`.
   */
  private async reconcile(generation: number): Promise<void> {
    for (const [id, entry] of [...this.pending]) {
      if (entry.generation >= generation || this.generation !== generation) continue
      try {
        const s = await this.client.messageStatus(id)
        if (s.status !== 'sent' && this.pending.get(id)?.generation === entry.generation) this.pending.delete(id)
      } catch (err) {
        if (err instanceof RelayApiError && err.status === 404) this.pending.delete(id)
        else return // the relay went away again: the next connection reconciles
      }
    }
  }

  // --- acknowledging ---

  private settle(ids: string[], refused: Map<string, RelayApiError>, via: AckOutcome['via']): AckOutcome {
    const outcome: AckOutcome = { acked: [], not_found: [], failed: [], via, pending_count: 0 }
    for (const id of ids) {
      const err = refused.get(id)
      if (!err) outcome.acked.push(id)
      else if (err.code === 'message_not_found') outcome.not_found.push(id)
      else {
        outcome.failed.push({ message_id: id, error: `${err.code}: ${err.message}` })
        continue
      }
      this.forget(id)
    }
    outcome.pending_count = this.count
    return outcome
  }

  private async ackOverHttp(ids: string[]): Promise<AckOutcome> {
    const refused = new Map<string, RelayApiError>()
    const failed: AckOutcome['failed'] = []
    for (const id of ids) {
      try {
        const m = await this.client.getMessage(id)
        // reading marks delivered only for the recipient; a message this agent sent is not in its inbox
        if (m.recipient_key !== this.client.publicKey) refused.set(id, new RelayApiError(404, 'message_not_found', 'not a message to you', null, null))
      } catch (err) {
        if (err instanceof RelayApiError && err.status !== 429 && err.status < 500) refused.set(id, err)
        else failed.push({ message_id: id, error: (err as Error)?.message ?? String(err) })
      }
    }
    const outcome = this.settle(
      ids.filter((id) => !failed.some((f) => f.message_id === id)),
      refused,
      'http',
    )
    outcome.failed.push(...failed)
    return outcome
  }

  private forget(id: string): void {
    this.pending.delete(id)
    this.recentAcks.push(id)
    if (this.recentAcks.length > RECENT_ACKS) this.recentAcks.shift()
  }

  private dropExpired(): void {
    const now = new Date(this.now()).toISOString()
    for (const [id, e] of this.pending) if (e.message.expires_at <= now) this.pending.delete(id)
  }

  private setState(s: Partial<ConnectionState> & { state: ConnectionStateName }): void {
    this.state = { websocket_url: this.state.websocket_url, since: this.iso(), synced: false, ...s }
    // no backlog is coming: whoever waits for one should answer with what there is
    if (s.state === 'disconnected' || s.state === 'refused') for (const done of this.syncWaiters.splice(0)) done(false)
  }

  private iso(): string {
    return new Date(this.now()).toISOString()
  }
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms)
    p.then(
      (v) => {
        clearTimeout(timer)
        resolve(v)
      },
      (e) => {
        clearTimeout(timer)
        reject(e)
      },
    )
  })
}

function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms)
    signal.addEventListener('abort', () => {
      clearTimeout(timer)
      resolve()
    }, { once: true })
  })
}
