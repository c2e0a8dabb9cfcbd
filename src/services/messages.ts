/**
 * Messages (SPEC §4): sending with every check of §4.3 in order, polling, reading by id, status, thread
 * listings, acknowledgements and the backlog query of push channels. Framework-free: HTTP routes and
 * WebSocket frames call the same methods. Expiry is decided by time on every read (§4.6); the sweep in
 * messages-sweep.ts only tidies storage.
 */
import { SQLiteError } from 'bun:sqlite'
import { RelayError } from '../errors.ts'
import type { Clock } from '../lib/clock.ts'
import { iso } from '../lib/clock.ts'
import { newMessageId } from '../lib/ids.ts'
import type { AgentRow } from '../storage/agents-repo.ts'
import type { GroupCommit } from '../storage/group-commit.ts'
import type { MessageRow, MessagesRepo } from '../storage/messages-repo.ts'
import type { AclService } from './acl.ts'
import { resolveAttachments as rejectAllAttachments, type AttachmentResolver } from './attachments.ts'
import { encodeCursor } from './cursor.ts'
import type { RelayEvents } from './events.ts'
import { checkThreadId, parsePageQuery, parsePollQuery, parseSendInput, type RawQuery } from './messages-input.ts'
import { effectiveStatus, messageStatusToJson, messageToJson } from './messages-json.ts'
import type { MessageJson, MessagePageJson, MessageStatus, MessageStatusJson, SendResultJson } from './models/message.ts'
import { withRateHeaders, type RateInfo, type RateLimiter } from './rate-limiter.ts'

export interface SendOutcome extends SendResultJson {
  /** The sender's send window after this message (headers empty when unlimited). */
  rate: RateInfo
}

export interface PollOutcome extends MessagePageJson {
  rate: RateInfo
}

interface PreparedSend {
  row: MessageRow
  blobIds: string[]
  rate: RateInfo
}

export interface MessagesServiceDeps {
  repo: MessagesRepo
  acl: AclService
  rateLimiter: RateLimiter
  clock: Clock
  events: RelayEvents
  /** Group commit shared with the rest of the relay; accepted sends are committed through it. */
  writes: GroupCommit
  /** How long an expired envelope stays readable after expires_at (SPEC §4.6, RELAY_EXPIRED_RETENTION). */
  expiredRetentionMs: number
}

const notFound = () => new RelayError('message_not_found', 'No such message, or not yours to read')

/** A step inside the insert transaction of an accepted message; see `onInsert`. */
export type InsertHook = (message: MessageRow, blobIds: readonly string[]) => void

export class MessagesService {
  private readonly repo: MessagesRepo
  private readonly acl: AclService
  private readonly limiter: RateLimiter
  private readonly clock: Clock
  private readonly events: RelayEvents
  private readonly retentionMs: number
  private resolveAttachments: AttachmentResolver = rejectAllAttachments
  private readonly writes: GroupCommit
  private readonly insertHooks: InsertHook[] = []

  constructor(deps: MessagesServiceDeps) {
    this.repo = deps.repo
    this.acl = deps.acl
    this.limiter = deps.rateLimiter
    this.clock = deps.clock
    this.events = deps.events
    this.retentionMs = deps.expiredRetentionMs
    this.writes = deps.writes
  }

  /**
   * Registers a step that runs inside the transaction inserting each accepted message, with the
   * distinct ids of the blobs it attaches: tying blob lifetimes to it (SPEC §6), queueing its webhook
   * delivery (§9). Its writes commit with the message or not at all; a throw refuses the send.
   * Synchronous.
   */
  onInsert(hook: InsertHook): void {
    this.insertHooks.push(hook)
  }

  /** Lets the blobs feature check attachments against blob records (SPEC §4.3 check 4). */
  setAttachmentResolver(resolver: AttachmentResolver): void {
    this.resolveAttachments = resolver
  }

  /**
   * Sends a message from `sender` (SPEC §4.3), checks in order: 413 body size, 400 shape, 422 no
   * content, 422 attachments, 429 rate limit (counted from here on, even if refused below), 403
   * `forbidden` for a suspended recipient, 403 `acl_denied` by inbox policy / ACL. Self-sends and
   * unknown recipients are accepted. Returns once the message is committed (in a transaction of its
   * own); then `messageAccepted` is emitted for push channels. Errors carry X-RateLimit-* headers.
   */
  send(sender: AgentRow, input: unknown): SendOutcome {
    const prepared = this.prepareSend(sender, input)
    try {
      this.repo.transaction(() => this.insertWithFreshId(prepared.row, prepared.blobIds))
    } catch (err) {
      throw withRateHeaders(err, prepared.rate)
    }
    return this.accepted(prepared)
  }

  /**
   * `send` with group commit: the same checks, answered synchronously when they fail; an accepted
   * message is committed together with the others accepted in the same event-loop turn, and the promise
   * resolves once that commit is done. The HTTP route uses this; throughput under concurrency is several
   * times that of one transaction per message.
   */
  async sendBatched(sender: AgentRow, input: unknown): Promise<SendOutcome> {
    const prepared = this.prepareSend(sender, input)
    try {
      await this.writes.write(() => this.insertWithFreshId(prepared.row, prepared.blobIds))
    } catch (err) {
      throw withRateHeaders(err, prepared.rate)
    }
    return this.accepted(prepared)
  }

  /** Commits messages waiting for group commit (a graceful stop calls this). */
  flushPending(): void {
    this.writes.flush()
  }

  /**
   * One page of the caller's inbox (SPEC §4.4), oldest first. With status `sent` (the default) the
   * returned messages become `delivered` in the same synchronous transaction that reads them, so two
   * concurrent polls can never both receive one message. Because every returned message leaves the
   * `sent` set, the next `sent` page is simply the oldest remaining ones: the cursor is checked but not
   * needed as a position, so a message accepted in the same millisecond as the last one returned (with
   * a smaller random id) is never passed over. Other statuses page by cursor position.
   * 400 for bad parameters, then 429.
   */
  poll(recipientKey: string, query: RawQuery = {}): PollOutcome {
    const now = this.clock.now()
    let rate: RateInfo | null = null
    try {
      const req = parsePollQuery(query)
      rate = this.limiter.enforce('poll', recipientKey, now)
      const cutoff = now - this.retentionMs
      let rows: MessageRow[]
      if (req.filter.status === 'sent') {
        rows = this.repo.transaction(() => {
          const found = this.repo.listInbox(recipientKey, req.filter, null, req.limit + 1, now, cutoff)
          this.repo.markDelivered(found.slice(0, req.limit).map((r) => r.messageId), now)
          return found
        })
        for (const r of rows.slice(0, req.limit)) {
          r.status = 'delivered'
          r.deliveredAt = now
        }
      } else {
        rows = this.repo.listInbox(recipientKey, req.filter, req.after, req.limit + 1, now, cutoff)
      }
      return { ...this.page(rows, req.limit, now), rate }
    } catch (err) {
      throw withRateHeaders(err, rate ?? this.limiter.peek('poll', recipientKey, now))
    }
  }

  /** A message by id for its sender or recipient (others: 404); the recipient's read delivers it. */
  get(callerKey: string, messageId: string): MessageJson {
    const now = this.clock.now()
    const row = this.readable(callerKey, messageId, now)
    if (row.recipientKey === callerKey) this.deliverRow(row, now)
    return messageToJson(row, now)
  }

  /** SPEC §4.2 status view; changes nothing. */
  status(callerKey: string, messageId: string): MessageStatusJson {
    const now = this.clock.now()
    return messageStatusToJson(this.readable(callerKey, messageId, now), now)
  }

  /** The thread's messages the caller sent or received, oldest first (SPEC §4.5); changes nothing. */
  thread(callerKey: string, threadId: string, query: RawQuery = {}): MessagePageJson {
    const now = this.clock.now()
    checkThreadId(threadId)
    const req = parsePageQuery(query)
    const rows = this.repo.listThread(threadId, callerKey, req.after, req.limit + 1, now, now - this.retentionMs)
    return this.page(rows, req.limit, now)
  }

  /**
   * Recipient acknowledgement (WebSocket `ack`, SPEC §8): marks the message delivered. Idempotent; an
   * expired message stays expired. Unknown ids and messages the caller did not receive → 404.
   */
  ack(recipientKey: string, messageId: string): { message_id: string; status: MessageStatus } {
    const now = this.clock.now()
    const row = this.readable(recipientKey, messageId, now)
    if (row.recipientKey !== recipientKey) throw notFound()
    this.deliverRow(row, now)
    return { message_id: row.messageId, status: effectiveStatus(row, now) }
  }

  /**
   * Unexpired `sent` messages for `recipientKey`, oldest first, after the given position, without
   * changing them: the backlog a push channel sends (SPEC §8.3). Serialize with `messageToJson`.
   */
  pendingFor(recipientKey: string, opts: { afterCreatedAt?: number; afterId?: string; limit: number }): MessageRow[] {
    const now = this.clock.now()
    const after = opts.afterCreatedAt === undefined ? null : { createdAt: opts.afterCreatedAt, messageId: opts.afterId ?? '' }
    return this.repo.listInbox(recipientKey, { status: 'sent' }, after, opts.limit, now, now - this.retentionMs)
  }

  /** Marks the `sent`, unexpired ones among `ids` delivered (webhook 2xx, acks); returns how many. */
  markDelivered(ids: readonly string[], now: number = this.clock.now()): number {
    return this.repo.markDelivered(ids, now)
  }

  /** The stored row of a message, whatever its state (for delivery channels); null when gone. */
  findRow(messageId: string): MessageRow | null {
    return this.repo.find(messageId)
  }

  // --- internals ---

  /** SPEC §4.3 checks 1–6 and the row to store; errors carry the sender's rate headers. */
  private prepareSend(sender: AgentRow, input: unknown): PreparedSend {
    const now = this.clock.now()
    const senderKey = sender.publicKey
    let rate: RateInfo | null = null
    try {
      const req = parseSendInput(input)
      const attachments = this.resolveAttachments(senderKey, req.attachments, now)
      rate = this.limiter.enforce('send', senderKey, now)
      this.admit(senderKey, req.recipientKey)
      const row: MessageRow = {
        messageId: newMessageId(now),
        senderKey,
        recipientKey: req.recipientKey,
        contentType: req.contentType,
        body: req.bodyText,
        attachments: attachments.length ? JSON.stringify(attachments) : null,
        threadId: req.threadId ?? this.inheritedThread(senderKey, req.inReplyTo, now),
        inReplyTo: req.inReplyTo,
        metadata: req.metadataText,
        status: 'sent',
        createdAt: now,
        expiresAt: now + req.expiresInMs,
        deliveredAt: null,
      }
      return { row, blobIds: attachments.map((a) => a.blob_id), rate }
    } catch (err) {
      throw withRateHeaders(err, rate ?? this.limiter.peek('send', senderKey, now))
    }
  }

  /** After the commit: tell push channels, answer the sender. */
  private accepted({ row, rate }: PreparedSend): SendOutcome {
    this.events.emit('messageAccepted', { messageId: row.messageId, recipientKey: row.recipientKey, senderKey: row.senderKey })
    return {
      message_id: row.messageId,
      status: 'sent',
      created_at: iso(row.createdAt),
      expires_at: iso(row.expiresAt),
      rate,
    }
  }

  /** SPEC §4.3 step 6. A self-send is always accepted; an unknown recipient is accepted. */
  private admit(senderKey: string, recipientKey: string): void {
    if (recipientKey === senderKey) return
    const recipient = this.repo.recipient(recipientKey)
    if (!recipient) return
    if (recipient.status === 'suspended') throw new RelayError('forbidden', 'The recipient is suspended')
    if (!this.acl.admits(recipientKey, recipient.inboxPolicy, senderKey)) {
      throw new RelayError('acl_denied', "The recipient's inbox policy does not accept messages from you")
    }
  }

  /** SPEC §4.3: a reply without thread_id joins the thread of the message it answers, if readable. */
  private inheritedThread(senderKey: string, inReplyTo: string | null, now: number): string | null {
    if (inReplyTo === null) return null
    const parent = this.repo.find(inReplyTo)
    if (!parent || !this.canRead(parent, senderKey, now)) return null
    return parent.threadId
  }

  private insertWithFreshId(message: MessageRow, blobIds: string[]): void {
    for (let attempt = 0; ; attempt++) {
      try {
        this.repo.insert(message, blobIds)
        if (this.insertHooks.length) {
          const distinct = [...new Set(blobIds)]
          for (const hook of this.insertHooks) hook(message, distinct)
        }
        return
      } catch (err) {
        // 48 random bits per second: a collision is all but impossible, but never answer 500 for one
        if (attempt < 3 && err instanceof SQLiteError && err.code === 'SQLITE_CONSTRAINT_PRIMARYKEY') {
          message.messageId = newMessageId(message.createdAt)
          continue
        }
        throw err
      }
    }
  }

  /** Whether the message still exists for readers and `key` is its sender or recipient. */
  private canRead(row: MessageRow, key: string, now: number): boolean {
    if (row.senderKey !== key && row.recipientKey !== key) return false
    if (row.expiresAt <= now - this.retentionMs) return false
    return !(row.status === 'delivered' && row.expiresAt <= now)
  }

  private readable(callerKey: string, messageId: string, now: number): MessageRow {
    const row = this.repo.find(messageId)
    if (!row || !this.canRead(row, callerKey, now)) throw notFound()
    return row
  }

  private deliverRow(row: MessageRow, now: number): void {
    if (row.status !== 'sent' || row.expiresAt <= now) return
    if (this.repo.markDeliveredFor(row.messageId, row.recipientKey, now)) {
      row.status = 'delivered'
      row.deliveredAt = now
    }
  }

  private page(rows: MessageRow[], limit: number, now: number): MessagePageJson {
    const hasMore = rows.length > limit
    const shown = hasMore ? rows.slice(0, limit) : rows
    const last = shown[shown.length - 1]
    return {
      messages: shown.map((r) => messageToJson(r, now)),
      has_more: hasMore,
      next_cursor: hasMore ? encodeCursor({ createdAt: last.createdAt, messageId: last.messageId }) : null,
    }
  }
}
