/**
 * Signals between instances over PostgreSQL LISTEN/NOTIFY (Bun.SQL's `listen`/`notify`). An announcement
 * reaches this instance's listeners at once ('local') and is then sent as a small notice (the message id
 * or the agent key, and this instance's id) — after the commit, never inside the writing transaction.
 * Other instances read the message by id and hand it to their listeners as 'remote'; an instance skips
 * its own notices. When the listening connection drops, Bun reconnects and re-subscribes: then the resync
 * listeners run, since notices sent meanwhile are lost.
 */
import type { SQL } from 'bun'
import type { Logger } from '../../lib/logger.ts'
import type { MessageRecord } from '../../services/models/records.ts'
import type { MessageStore, Signals } from '../../services/ports.ts'

/** The channel every instance of a database listens on. */
export const SIGNAL_CHANNEL = 'relay_signals'

/**
 * An agent removal announced or heard within this long is not sent again: every instance also finds a
 * suspension in its agent change scan and announces it, which would otherwise echo once per instance.
 */
const GONE_ECHO_MS = 5_000

type Notice = { i: string; t: 'm'; id: string } | { i: string; t: 'g'; k: string; r: 'deleted' | 'suspended' }
type GoneListener = (publicKey: string, reason: 'deleted' | 'suspended') => void

export class PostgresSignals implements Signals {
  private readonly messageListeners: ((m: MessageRecord, origin: 'local' | 'remote') => void)[] = []
  private readonly goneListeners: GoneListener[] = []
  private readonly resyncListeners: (() => void)[] = []
  private subscription: { unlisten(): Promise<void> } | null = null
  private listens = 0
  private closed = false
  /** `key:reason` → when it was last sent or heard (performance.now()). */
  private readonly goneSeen = new Map<string, number>()

  constructor(
    private readonly sql: SQL,
    readonly instanceId: string,
    private readonly messages: Pick<MessageStore, 'find'>,
    private readonly logger: Logger,
  ) {}

  /** Subscribes; resolves once the server acknowledged it. */
  async start(): Promise<void> {
    this.subscription = await this.sql.listen(
      SIGNAL_CHANNEL,
      (payload) => this.receive(payload),
      () => {
        // the first acknowledgement is the subscription itself; later ones follow a reconnect
        if (++this.listens > 1) {
          this.logger.warn('signal link to the database came back; resynchronizing')
          for (const l of this.resyncListeners) this.call(l)
        }
      },
    )
  }

  messageCommitted(message: MessageRecord): void {
    for (const l of this.messageListeners) this.call(() => l(message, 'local'))
    this.send({ i: this.instanceId, t: 'm', id: message.messageId })
  }

  onMessage(listener: (message: MessageRecord, origin: 'local' | 'remote') => void): void {
    this.messageListeners.push(listener)
  }

  agentGone(publicKey: string, reason: 'deleted' | 'suspended'): void {
    for (const l of this.goneListeners) this.call(() => l(publicKey, reason))
    if (this.recentlyGone(publicKey, reason)) return
    this.send({ i: this.instanceId, t: 'g', k: publicKey, r: reason })
  }

  /** Whether this removal was sent or heard within GONE_ECHO_MS; records it either way. */
  private recentlyGone(publicKey: string, reason: string): boolean {
    const now = performance.now()
    if (this.goneSeen.size > 10_000) {
      for (const [k, at] of this.goneSeen) if (now - at > GONE_ECHO_MS) this.goneSeen.delete(k)
    }
    const id = `${publicKey}:${reason}`
    const last = this.goneSeen.get(id)
    this.goneSeen.set(id, now)
    return last !== undefined && now - last < GONE_ECHO_MS
  }

  onAgentGone(listener: GoneListener): void {
    this.goneListeners.push(listener)
  }

  onResync(listener: () => void): void {
    this.resyncListeners.push(listener)
  }

  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    await this.subscription?.unlisten().catch(() => {})
    this.subscription = null
  }

  private send(notice: Notice): void {
    if (this.closed) return
    this.sql.notify(SIGNAL_CHANNEL, JSON.stringify(notice)).catch((err) => {
      // other instances catch up when their sockets resync or their clients poll
      this.logger.warn('sending a signal to other instances failed', { error: String(err) })
    })
  }

  private receive(payload: string): void {
    let notice: Notice
    try {
      notice = JSON.parse(payload) as Notice
    } catch {
      return
    }
    if (this.closed || notice.i === this.instanceId) return
    if (notice.t === 'g') {
      this.recentlyGone(notice.k, notice.r)
      for (const l of this.goneListeners) this.call(() => l(notice.k, notice.r))
      return
    }
    if (notice.t === 'm' && typeof notice.id === 'string') {
      this.messages
        .find(notice.id)
        .then((message) => {
          if (!message || this.closed) return
          for (const l of this.messageListeners) this.call(() => l(message, 'remote'))
        })
        .catch((err) => this.logger.warn('reading a message announced by another instance failed', { error: String(err) }))
    }
  }

  private call(fn: () => void): void {
    try {
      fn()
    } catch (err) {
      this.logger.error('signal listener failed', { error: String(err) })
    }
  }
}
