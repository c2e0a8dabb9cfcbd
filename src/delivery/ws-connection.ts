/**
 * One WebSocket connection and what it has been pushed (docs/protocol.md §8.3). After auth the connection syncs:
 * it pages through the agent's backlog (unexpired `sent` messages, oldest first) while new messages
 * accepted meanwhile are held back; then it goes live and pushes each new message as it is committed.
 *
 * No message is pushed twice on one connection where backlog and live events overlap: live messages
 * seen during the sync are pushed after it unless a page already carried them, and ids pushed by the
 * sync are remembered until every message committed before its last page has been announced.
 *
 * Backpressure: when a send is queued rather than written (the client reads slowly) the connection
 * stops pushing; what it misses stays `sent`. When the socket drains, it syncs again from the first
 * missed message, so a slow consumer catches up without the relay holding its messages in memory.
 *
 * A failed read of the backlog (the database restarting, a connection killed) is retried with growing
 * pauses while live messages stay held; when the reads keep failing the socket is closed with 1011, so
 * that the client reconnects (and syncs) rather than sitting on a connection that receives nothing.
 */
import type { AgentRecord } from '../services/models/records.ts'
import type { MessageRecord, MessagePosition as Position } from '../services/models/records.ts'
import { CLOSE } from './ws-frames.ts'

/** What a connection needs of the Bun socket; a small surface so that tests can fake it. */
export interface PushSocket {
  /** Bun semantics: bytes written (> 0), -1 queued under backpressure, 0 dropped or closed. */
  send(text: string): number
  close(code?: number, reason?: string): void
  terminate(): void
  ping(): void
}

export interface PushSource {
  /** Unexpired `sent` messages of the recipient after `after`, oldest first. */
  backlog(recipientKey: string, after: Position | null, limit: number): Promise<MessageRecord[]>
  /** A message as stored now, whatever its state; null when gone. */
  find(messageId: string): Promise<MessageRecord | null>
  /** Reports a failed read (the sync is retried at the next drain or reconnect). */
  onError?(err: unknown): void
  /** The `message` frame of a row. */
  frame(row: MessageRecord): string
  now(): number
}

/** Backlog rows read per page; pages after the first run on later event-loop turns. */
const PAGE = 100
/** Live messages held back during a sync; beyond that they are fetched again by a later sync. */
const MAX_HELD = 1000
/** Recently pushed ids remembered per connection, to skip them when a sync restarts after backpressure. */
const RECENT = 64
/**
 * How long ids pushed by a sync are remembered after it ends: a message read by the last page may be
 * announced a little later (by another instance, in a cluster), and must not be pushed twice.
 */
const SYNC_MEMORY_MS = 2000

const before = (a: Position, b: Position) => a.createdAt < b.createdAt || (a.createdAt === b.createdAt && a.messageId < b.messageId)
const positionOf = (row: MessageRecord): Position => ({ createdAt: row.createdAt, messageId: row.messageId })

/** Pauses before each new try of a failed sync read; after the last one fails the socket is closed. */
export const SYNC_RETRY_MS: readonly number[] = [100, 250, 500, 1000, 2000, 4000]

export type ConnectionState = 'new' | 'authenticating' | 'open' | 'closed'

export class Connection {
  state: ConnectionState = 'new'
  agent: AgentRecord | null = null
  /** Counted in the per-agent connection registry. */
  registered = false
  /** Seen traffic (a frame or a pong) since the last keepalive ping. */
  alive = true
  authTimer: ReturnType<typeof setTimeout> | undefined
  /** Frames that arrived while the auth frame was being checked, handled once it passes (null: none). */
  early: (string | Uint8Array)[] | null = null
  earlyBytes = 0
  /** Answers to frames leave in the order the frames came, though the frames are handled concurrently. */
  private replies: Promise<void> | null = null
  private pendingReplies = 0

  private phase: 'sync' | 'live' = 'sync'
  private cursor: Position | null = null
  /** Live messages seen during a sync: ids only, so that holding them costs little whatever their size (null: none). */
  private held: string[] | null = null
  private syncPushed: Set<string> | null = null
  private recent: string[] | null = null
  private recentSet: Set<string> | null = null
  private recentNext = 0
  private congested = false
  private missedFrom: Position | null = null
  private pageScheduled = false
  /** A backlog page is being read; a sync step asked for meanwhile runs after it. */
  private reading = false
  private readAgain = false
  /** Failed sync reads in a row, and the pending retry. */
  private failures = 0
  private retryTimer: ReturnType<typeof setTimeout> | undefined

  constructor(
    readonly id: number,
    readonly socket: PushSocket,
    private readonly source: PushSource,
    private readonly retryMs: readonly number[] = SYNC_RETRY_MS,
  ) {}

  get isOpen(): boolean {
    return this.state === 'open'
  }

  get publicKey(): string {
    return (this.agent as AgentRecord).publicKey
  }

  /**
   * Sends the answer to a frame once the answers to earlier frames have left: sends are handled
   * concurrently (their commits group), but a client reads its answers in the order it asked.
   * A null answer (an ack that worked) sends nothing but keeps its place.
   */
  answer(answer: string | null | Promise<string | null>): void {
    if (this.pendingReplies === 0 && typeof answer === 'string') return this.reply(answer)
    if (answer === null && this.pendingReplies === 0) return
    this.pendingReplies++
    this.replies = (this.replies ?? Promise.resolve())
      .then(() => answer)
      .then((text) => {
        if (text !== null) this.reply(text)
      })
      .finally(() => {
        // the last answer in line: an idle connection keeps no promise chain
        if (--this.pendingReplies === 0) this.replies = null
      })
  }

  /** Sends a reply frame (auth_result, send_result, pong, error); replies do not wait for drain. */
  reply(text: string): void {
    if (this.state !== 'closed') this.socket.send(text)
  }

  /** Authenticated: push the backlog, then go live. */
  open(agent: AgentRecord): void {
    this.agent = agent
    this.state = 'open'
    this.startSync(null)
  }

  /** A message committed for this agent (live event); `text` is its frame. */
  offer(row: MessageRecord, text: string): void {
    if (this.state !== 'open' || this.wasPushed(row.messageId)) return
    if (this.phase === 'sync') {
      if ((this.held?.length ?? 0) < MAX_HELD) (this.held ??= []).push(row.messageId)
      else this.missed(row)
      return
    }
    if (this.congested || !this.push(row.messageId, text)) this.missed(row)
  }

  /** The socket wrote out its queue: continue the sync, or catch up from the first missed message. */
  drained(): void {
    this.congested = false
    if (this.state !== 'open') return
    if (this.phase === 'sync') return this.syncPage()
    if (this.missedFrom) {
      const from = this.missedFrom
      this.missedFrom = null
      // every message created at or after the first missed one; those pushed already are skipped
      this.startSync({ createdAt: from.createdAt, messageId: '' })
    }
  }

  /** Whether pushes wait for the socket to drain (tests, health). */
  get isCongested(): boolean {
    return this.congested
  }

  private startSync(from: Position | null): void {
    this.phase = 'sync'
    this.cursor = from
    this.syncPushed = new Set()
    this.syncPage()
  }

  /** Restarts the sync from the start of the backlog (notices may have been lost: a cluster reconnected). */
  resync(): void {
    if (this.state !== 'open') return
    this.startSync(null)
  }

  private syncPage(): void {
    if (this.reading) {
      this.readAgain = true
      return
    }
    this.reading = true
    this.readPage()
      .then(
        () => {
          this.failures = 0
        },
        (err) => this.failed(err),
      )
      .finally(() => {
        this.reading = false
        if (this.readAgain) {
          this.readAgain = false
          this.syncPage()
        }
      })
  }

  /**
   * A sync read failed: it is tried again after a pause (live messages stay held meanwhile), and when
   * every try failed the socket is closed so that the client reconnects.
   */
  private failed(err: unknown): void {
    this.source.onError?.(err)
    if (this.state !== 'open') return
    if (this.failures >= this.retryMs.length) {
      this.stopRetry()
      this.socket.close(CLOSE.unavailable, 'messages could not be read; reconnect')
      return
    }
    const delay = this.retryMs[this.failures++]
    clearTimeout(this.retryTimer)
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined
      if (this.state === 'open' && this.phase === 'sync') this.syncPage()
    }, delay)
    ;(this.retryTimer as { unref?: () => void }).unref?.()
  }

  /** Drops a pending retry (the connection closed). */
  stopRetry(): void {
    clearTimeout(this.retryTimer)
    this.retryTimer = undefined
  }

  private async readPage(): Promise<void> {
    if (this.state !== 'open' || this.phase !== 'sync' || this.congested) return
    const cursor = this.cursor
    const rows = await this.source.backlog(this.publicKey, cursor, PAGE)
    // the connection may have closed, congested or restarted its sync while the page was read
    if (this.state !== 'open' || this.phase !== 'sync' || this.congested || this.cursor !== cursor) return
    for (const row of rows) {
      if (!this.wasPushed(row.messageId) && !this.push(row.messageId, this.source.frame(row))) return
      this.cursor = positionOf(row)
      if (this.congested) return
    }
    if (rows.length === PAGE) {
      if (this.pageScheduled) return
      this.pageScheduled = true
      setImmediate(() => {
        this.pageScheduled = false
        this.syncPage()
      })
      return
    }
    await this.finishSync()
  }

  private async finishSync(): Promise<void> {
    this.phase = 'live'
    const held = this.held ?? []
    this.held = null
    for (let i = 0; i < held.length; i++) {
      const id = held[i]
      if (this.wasPushed(id)) continue
      // read again: it may have been acked, polled or expired while the sync ran
      let row: MessageRecord | null
      try {
        row = await this.source.find(id)
      } catch (err) {
        // back to the sync: the ids not yet read are held again (before those announced meanwhile)
        if (this.state === 'open' && this.phase === 'live') {
          this.phase = 'sync'
          this.held = held.slice(i).concat(this.held ?? [])
        }
        throw err
      }
      const now = this.source.now()
      if (row && row.status === 'sent' && row.expiresAt > now && row.recipientKey === this.publicKey) this.offer(row, this.source.frame(row))
    }
    // a message committed before the last page but announced after it must still be skipped
    const pushed = this.syncPushed
    const timer = setTimeout(() => {
      if (this.syncPushed === pushed) this.syncPushed = null
    }, SYNC_MEMORY_MS)
    ;(timer as { unref?: () => void }).unref?.()
  }

  /** Sends one message frame; false when the socket dropped it. */
  private push(messageId: string, text: string): boolean {
    const result = this.socket.send(text)
    if (result === 0) {
      this.congested = true
      return false
    }
    this.remember(messageId)
    if (result === -1) this.congested = true
    return true
  }

  private missed(row: MessageRecord): void {
    const at = positionOf(row)
    if (!this.missedFrom || before(at, this.missedFrom)) this.missedFrom = at
  }

  private wasPushed(messageId: string): boolean {
    return (this.recentSet?.has(messageId) ?? false) || (this.syncPushed?.has(messageId) ?? false)
  }

  private remember(messageId: string): void {
    this.syncPushed?.add(messageId)
    if (!this.recent) {
      this.recent = []
      this.recentSet = new Set()
    }
    const set = this.recentSet as Set<string>
    if (this.recent.length < RECENT) this.recent.push(messageId)
    else {
      set.delete(this.recent[this.recentNext])
      this.recent[this.recentNext] = messageId
      this.recentNext = (this.recentNext + 1) % RECENT
    }
    set.add(messageId)
  }
}
