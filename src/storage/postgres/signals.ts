/**
 * Signals between instances over PostgreSQL LISTEN/NOTIFY (Bun.SQL's `listen`/`notify`). An announcement
 * reaches this instance's listeners at once ('local') and is then sent as a small notice (the message ids
 * with their recipients, or the agent key, and this instance's id) — after the commit, never inside the
 * writing transaction. The messages committed during one turn of the event loop (a group commit) share
 * one notice. Other instances read those whose recipient holds a socket there (one statement for the
 * notice) and hand them to their listeners as 'remote'; an instance skips its own notices.
 *
 * The listening connection is a connection of its own, watched: every `probeMs` the instance sends a
 * probe notice to itself. When nothing has been heard on the link for three probes (the connection
 * dropped, hangs, or its server process stalls while the pool still works) the link counts as down —
 * readiness reports it, so that a load balancer stops sending clients here — and a new connection is
 * opened, with growing pauses between tries. When the link hears again (its own probe, or Bun's own
 * reconnect re-subscribed) the resync listeners run, since notices sent meanwhile are lost.
 *
 * A notice that cannot be sent (NOTIFY failed after the commit) is kept and sent again at the next
 * probe; when too many wait, they are dropped and a resync notice tells the other instances to re-read
 * instead.
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
/** How often an instance probes its own signal link. */
export const SIGNAL_PROBE_MS = 2_000
/** Probes missed in a row before the link counts as down. */
const MISSED_PROBES = 3
/** Notices kept for another try when NOTIFY fails; beyond that, the others are told to resync. */
const MAX_UNSENT = 10_000
/** Longest pause between two tries to open a new listening connection. */
const MAX_RELINK_PAUSE_MS = 30_000
/** Payload bytes one notice holds at most (PostgreSQL refuses payloads of 8,000 bytes and more). */
const MAX_PAYLOAD = 7_500

type Notice =
  | { i: string; t: 'm'; id: string; r?: string }
  /** Several committed messages: [message id, recipient key] pairs. */
  | { i: string; t: 'n'; m: [string, string][] }
  | { i: string; t: 'g'; k: string; r: 'deleted' | 'suspended' }
  | { i: string; t: 'p' }
  | { i: string; t: 'r' }
type GoneListener = (publicKey: string, reason: 'deleted' | 'suspended') => void

export interface SignalOptions {
  /** Opens the dedicated listening connection (a pool of one); without it the pool's own is used. */
  connectListener?: () => SQL
  probeMs?: number
}

export class PostgresSignals implements Signals {
  private readonly messageListeners: ((m: MessageRecord, origin: 'local' | 'remote') => void)[] = []
  private readonly goneListeners: GoneListener[] = []
  private readonly resyncListeners: (() => void)[] = []
  private subscription: { unlisten(): Promise<void> } | null = null
  private link: SQL | null = null
  private closed = false
  /** `key:reason` → when it was last sent or heard (performance.now()). */
  private readonly goneSeen = new Map<string, number>()
  private wanted: (recipientKey: string) => boolean = () => true
  private readonly probeMs: number
  private probeTimer: ReturnType<typeof setInterval> | undefined
  /** When something was last heard on the link (performance.now()). */
  private lastHeard = performance.now()
  private up = false
  private relinking = false
  private relinkPauseMs = 0
  private unsent: Notice[] = []
  private resyncOthers = false
  private flushing = false
  private sendFailing = false
  /** Messages committed during this turn, announced together at its end (one NOTIFY). */
  private committed: [string, string][] = []

  constructor(
    private readonly sql: SQL,
    readonly instanceId: string,
    private readonly messages: Pick<MessageStore, 'find'> & { findMany?(ids: readonly string[]): Promise<MessageRecord[]> },
    private readonly logger: Logger,
    private readonly opts: SignalOptions = {},
  ) {
    this.probeMs = opts.probeMs ?? SIGNAL_PROBE_MS
  }

  /** Subscribes; resolves once the server acknowledged it. */
  async start(): Promise<void> {
    await this.subscribe()
    this.up = true
    this.lastHeard = performance.now()
    this.probeTimer = setInterval(() => this.tick(), this.probeMs)
    ;(this.probeTimer as { unref?: () => void }).unref?.()
  }

  /** Null while the link to the other instances works, else what is wrong (readiness, health). */
  get problem(): string | null {
    if (this.closed || this.probeTimer === undefined) return null
    return this.up ? null : 'the signal link to the other instances is down'
  }

  private async subscribe(): Promise<void> {
    const link = this.opts.connectListener?.() ?? this.sql
    this.link = link
    let first = true
    try {
      this.subscription = await link.listen(
        SIGNAL_CHANNEL,
        (payload) => this.receive(payload),
        () => {
          // the first acknowledgement is the subscription itself; later ones follow Bun's own reconnect
          if (first) {
            first = false
            return
          }
          if (link !== this.link) return
          this.lastHeard = performance.now()
          this.up = true
          this.resync('signal link to the database came back; resynchronizing')
        },
      )
    } catch (err) {
      if (link !== this.sql) await link.close({ timeout: 0 }).catch(() => {})
      throw err
    }
  }

  /** Every probe period: probe the link, retry unsent notices, notice a silent link. */
  private tick(): void {
    if (this.closed) return
    const silentMs = performance.now() - this.lastHeard
    if (silentMs > this.probeMs * MISSED_PROBES) {
      if (this.up) {
        this.up = false
        this.logger.warn('signal link to the database is silent; reconnecting it', { silent_ms: Math.round(silentMs) })
      }
      void this.relink()
    }
    this.deliver({ i: this.instanceId, t: 'p' })
    void this.flush()
  }

  /** Replaces the listening connection; tries again later when that fails. */
  private async relink(): Promise<void> {
    if (this.relinking || this.closed || !this.opts.connectListener) return
    this.relinking = true
    const old = this.link
    this.subscription = null
    this.link = null
    if (old && old !== this.sql) void old.close({ timeout: 0 }).catch(() => {})
    try {
      await this.subscribe()
      this.relinkPauseMs = 0
      this.relinking = false
      // up again once its own probe comes back through it
      this.deliver({ i: this.instanceId, t: 'p' })
    } catch {
      this.relinkPauseMs = Math.min(MAX_RELINK_PAUSE_MS, Math.max(this.probeMs, this.relinkPauseMs * 2))
      const timer = setTimeout(() => {
        this.relinking = false
        void this.relink()
      }, this.relinkPauseMs)
      ;(timer as { unref?: () => void }).unref?.()
    }
  }

  /** Something arrived on the link: it works. */
  private heard(): void {
    this.lastHeard = performance.now()
    if (!this.up && !this.closed) {
      this.up = true
      this.resync('signal link to the database works again; resynchronizing')
    }
  }

  private resync(line: string): void {
    this.logger.warn(line)
    for (const l of this.resyncListeners) this.call(l)
  }

  messageCommitted(message: MessageRecord): void {
    for (const l of this.messageListeners) this.call(() => l(message, 'local'))
    if (this.closed) return
    // the messages of one group commit (and any other committed in the same turn) share one notice
    if (this.committed.push([message.messageId, message.recipientKey]) === 1) setImmediate(() => this.announceCommitted())
  }

  /** Sends the messages committed during the turn, as few notices as their size allows. */
  private announceCommitted(): void {
    const all = this.committed
    this.committed = []
    let part: [string, string][] = []
    let bytes = 0
    for (const entry of all) {
      const size = entry[0].length + entry[1].length + 8
      if (part.length > 0 && bytes + size > MAX_PAYLOAD) {
        this.send({ i: this.instanceId, t: 'n', m: part })
        part = []
        bytes = 0
      }
      part.push(entry)
      bytes += size
    }
    if (part.length > 0) this.send({ i: this.instanceId, t: 'n', m: part })
  }

  wantRecipients(filter: (recipientKey: string) => boolean): void {
    this.wanted = filter
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
    if (this.committed.length > 0) this.announceCommitted()
    this.closed = true
    clearInterval(this.probeTimer)
    const link = this.link
    const subscription = this.subscription
    this.subscription = null
    this.link = null
    if (link && link !== this.sql) await link.close({ timeout: 1 }).catch(() => {})
    else await subscription?.unlisten().catch(() => {})
  }

  private send(notice: Notice): void {
    if (this.closed) return
    // behind notices that failed: sent in order after them
    if (this.unsent.length > 0 || this.resyncOthers) return this.keep(notice)
    this.deliver(notice)
  }

  /** One NOTIFY; a notice that fails is kept for the next probe (probes are not kept). */
  private deliver(notice: Notice): void {
    this.sql.notify(SIGNAL_CHANNEL, JSON.stringify(notice)).then(
      () => {
        if (this.sendFailing) {
          this.sendFailing = false
          this.logger.warn('signals to other instances are sent again')
        }
      },
      (err) => {
        if (!this.sendFailing) {
          this.sendFailing = true
          this.logger.warn('sending a signal to other instances failed; retrying', { error: String(err) })
        }
        if (notice.t !== 'p') this.keep(notice)
      },
    )
  }

  private keep(notice: Notice): void {
    if (this.closed) return
    if (this.unsent.length >= MAX_UNSENT) {
      // too many to keep: the others re-read their backlogs instead
      this.unsent = []
      this.resyncOthers = true
      return
    }
    this.unsent.push(notice)
  }

  /** Sends the kept notices again, in order; stops at the first failure. */
  private async flush(): Promise<void> {
    if (this.flushing || this.closed) return
    this.flushing = true
    try {
      if (!this.resyncOthers && this.unsent.length === 0) return
      if (this.resyncOthers) {
        await this.sql.notify(SIGNAL_CHANNEL, JSON.stringify({ i: this.instanceId, t: 'r' }))
        this.resyncOthers = false
      }
      while (this.unsent.length > 0 && !this.closed) {
        await this.sql.notify(SIGNAL_CHANNEL, JSON.stringify(this.unsent[0]))
        this.unsent.shift()
      }
      if (this.sendFailing) {
        this.sendFailing = false
        this.logger.warn('signals to other instances are sent again')
      }
    } catch {
      // tried again at the next probe
    } finally {
      this.flushing = false
    }
  }

  private receive(payload: string): void {
    let notice: Notice
    try {
      notice = JSON.parse(payload) as Notice
    } catch {
      return
    }
    if (this.closed) return
    this.heard()
    if (notice.i === this.instanceId) return
    if (notice.t === 'r') {
      this.resync('another instance could not signal some messages; resynchronizing')
      return
    }
    if (notice.t === 'g') {
      this.recentlyGone(notice.k, notice.r)
      for (const l of this.goneListeners) this.call(() => l(notice.k, notice.r))
      return
    }
    if (notice.t === 'm' && typeof notice.id === 'string') {
      // a message for nobody connected here is not read (with N instances, each would read every message)
      if (typeof notice.r === 'string' && !this.wanted(notice.r)) return
      this.readAnnounced([notice.id])
      return
    }
    if (notice.t === 'n' && Array.isArray(notice.m)) {
      const ids: string[] = []
      for (const entry of notice.m) {
        if (!Array.isArray(entry) || typeof entry[0] !== 'string') continue
        if (typeof entry[1] === 'string' && !this.wanted(entry[1])) continue
        ids.push(entry[0])
      }
      if (ids.length > 0) this.readAnnounced(ids)
    }
  }

  /** Reads messages another instance announced (in one statement when several) and hands them to the listeners, in order. */
  private readAnnounced(ids: string[]): void {
    const read = ids.length > 1 && this.messages.findMany ? this.messages.findMany(ids) : Promise.all(ids.map((id) => this.messages.find(id)))
    read
      .then((found) => {
        if (this.closed) return
        const byId = new Map<string, MessageRecord>()
        for (const m of found) if (m) byId.set(m.messageId, m)
        for (const id of ids) {
          const message = byId.get(id)
          if (message) for (const l of this.messageListeners) this.call(() => l(message, 'remote'))
        }
      })
      .catch((err) => this.logger.warn('reading a message announced by another instance failed', { error: String(err) }))
  }

  private call(fn: () => void): void {
    try {
      fn()
    } catch (err) {
      this.logger.error('signal listener failed', { error: String(err) })
    }
  }
}
