/**
 * Messages (docs/protocol.md §4): sending with every check of §4.3 in order, polling, reading by id, status, thread
 * listings, acknowledgements and the backlog query of push channels. Framework-free: HTTP routes and
 * WebSocket frames call the same methods. Expiry is decided by time on every read (§4.6); the sweep in
 * messages-sweep.ts only tidies storage.
 */
import { RelayError } from '../errors.ts'
import type { Clock } from '../lib/clock.ts'
import { iso } from '../lib/clock.ts'
import { newMessageId } from '../lib/ids.ts'
import type { AclService } from './acl.ts'
import { resolveAttachments as rejectAllAttachments, type AttachmentResolver } from './attachments.ts'
import { encodeCursor } from './cursor.ts'
import { checkThreadId, parsePageQuery, parsePollQuery, parseSendInput, type RawQuery, type SendRequest } from './messages-input.ts'
import { assertEncryptedShape, inboxRequiresEncryption } from './encryption-policy.ts'
import { effectiveStatus, messageStatusToJson, messageToJson } from './messages-json.ts'
import type { MessageJson, MessagePageJson, MessageStatus, MessageStatusJson, SendResultJson } from './models/message.ts'
import type { AgentRecord, MessageRecord } from './models/records.ts'
import type { Signals, Storage, Stores } from './ports.ts'
import { withRateHeaders, type RateInfo, type RateLimiter } from './rate-limiter.ts'

export interface SendOutcome extends SendResultJson {
  /** The sender's send window after this message (headers empty when unlimited). */
  rate: RateInfo
}

export interface PollOutcome extends MessagePageJson {
  rate: RateInfo
}

interface PreparedSend {
  row: MessageRecord
  blobIds: string[]
  rate: RateInfo
}

export interface MessagesServiceDeps {
  storage: Storage
  acl: AclService
  rateLimiter: RateLimiter
  clock: Clock
  /** Accepted messages are announced here after their commit (push channels, other instances). */
  signals: Signals
  /** How long an expired envelope stays readable after expires_at (docs/protocol.md §4.6, RELAY_EXPIRED_RETENTION). */
  expiredRetentionMs: number
  /** Refuse every plaintext send (RELAY_REQUIRE_ENCRYPTION); agents can ask the same for their own inbox. */
  requireEncryption?: boolean
}

const notFound = () => new RelayError('message_not_found', 'No such message, or not yours to read')

/** A step run inside the unit of work that inserts a message; nothing to wait for when it returns no promise. */
export type InsertHook = (tx: Stores, message: MessageRecord, blobIds: readonly string[]) => Promise<void> | void

export class MessagesService {
  private readonly storage: Storage
  private readonly acl: AclService
  private readonly limiter: RateLimiter
  private readonly clock: Clock
  private readonly signals: Signals
  private readonly retentionMs: number
  private readonly requireEncryption: boolean
  private resolveAttachments: AttachmentResolver = rejectAllAttachments
  private readonly insertHooks: InsertHook[] = []

  constructor(deps: MessagesServiceDeps) {
    this.storage = deps.storage
    this.acl = deps.acl
    this.limiter = deps.rateLimiter
    this.clock = deps.clock
    this.signals = deps.signals
    this.retentionMs = deps.expiredRetentionMs
    this.requireEncryption = deps.requireEncryption ?? false
  }

  /**
   * Registers a step that runs inside the unit of work inserting each accepted message, with the
   * distinct ids of the blobs it attaches: tying blob lifetimes to it (docs/protocol.md §6), queueing
   * its webhook delivery (§9). Its writes commit with the message or not at all; a throw refuses the send.
   */
  onInsert(hook: InsertHook): void {
    this.insertHooks.push(hook)
  }

  /** Lets the blobs feature check attachments against blob records (docs/protocol.md §4.3 check 4). */
  setAttachmentResolver(resolver: AttachmentResolver): void {
    this.resolveAttachments = resolver
  }

  /**
   * Sends a message from `sender` (docs/protocol.md §4.3), checks in order: 413 body size, 400 shape,
   * 422 no content, 422 attachments, 429 rate limit (counted from here on, even if refused below), 403
   * `forbidden` for a suspended recipient, 403 `acl_denied` by inbox policy / ACL. Self-sends and
   * unknown recipients are accepted. Resolves once the message is committed (on SQLite together with
   * the other writes of the same event-loop turn), then announces it to push channels. Errors carry
   * X-RateLimit-* headers. HTTP and WebSocket sends both come here.
   */
  async send(sender: AgentRecord, input: unknown): Promise<SendOutcome> {
    const prepared = await this.prepareSend(sender, input)
    try {
      await this.storage.transaction((tx) => this.insertWithFreshId(tx, prepared.row, prepared.blobIds), { grouped: true })
    } catch (err) {
      throw withRateHeaders(err, prepared.rate)
    }
    this.signals.messageCommitted(prepared.row)
    const { row, rate } = prepared
    return { message_id: row.messageId, status: 'sent', created_at: iso(row.createdAt), expires_at: iso(row.expiresAt), rate }
  }

  /**
   * One page of the caller's inbox (docs/protocol.md §4.4), oldest first. With status `sent` (the
   * default) the returned messages become `delivered` in the same unit of work that reads them, so two
   * concurrent polls can never both receive one message. Because every returned message leaves the
   * `sent` set, the next `sent` page is simply the oldest remaining ones: the cursor is checked but not
   * needed as a position, so a message accepted in the same millisecond as the last one returned (with
   * a smaller random id) is never passed over. Other statuses page by cursor position.
   *
   * Limits (docs/protocol.md §7): the receive limit counts messages returned, not requests — a page holds
   * at most what is left of it (then `has_more` says more wait), and a poll with none left is a 429; the
   * requests themselves count against the generous `pollRequest` cap only. 400 for bad parameters, then 429.
   */
  async poll(recipientKey: string, query: RawQuery = {}): Promise<PollOutcome> {
    const now = this.clock.now()
    let rate: RateInfo | null = null
    try {
      const req = parsePollQuery(query)
      await this.limiter.enforce('pollRequest', recipientKey, now)
      const limit = Math.min(req.limit, await this.limiter.room('poll', recipientKey, now))
      const cutoff = now - this.retentionMs
      let rows: MessageRecord[]
      if (req.filter.status === 'sent') {
        rows = await this.storage.transaction(async ({ messages }) => {
          const found = await messages.listInbox(recipientKey, req.filter, null, limit + 1, now, cutoff)
          await messages.markDelivered(found.slice(0, limit).map((r) => r.messageId), now)
          return found
        })
        for (const r of rows.slice(0, limit)) {
          r.status = 'delivered'
          r.deliveredAt = now
        }
      } else {
        rows = await this.storage.messages.listInbox(recipientKey, req.filter, req.after, limit + 1, now, cutoff)
      }
      const page = this.page(rows, limit, now)
      rate = await this.limiter.take('poll', recipientKey, page.messages.length, now)
      return { ...page, rate }
    } catch (err) {
      throw withRateHeaders(err, rate ?? (await this.limiter.peek('poll', recipientKey, now)))
    }
  }

  /** A message by id for its sender or recipient (others: 404); the recipient's read delivers it. */
  async get(callerKey: string, messageId: string): Promise<MessageJson> {
    const now = this.clock.now()
    const row = await this.readable(callerKey, messageId, now)
    if (row.recipientKey === callerKey) await this.deliverRow(row, now)
    return messageToJson(row, now)
  }

  /** docs/protocol.md §4.2 status view; changes nothing. */
  async status(callerKey: string, messageId: string): Promise<MessageStatusJson> {
    const now = this.clock.now()
    return messageStatusToJson(await this.readable(callerKey, messageId, now), now)
  }

  /** The thread's messages the caller sent or received, oldest first (docs/protocol.md §4.5); changes nothing. */
  async thread(callerKey: string, threadId: string, query: RawQuery = {}): Promise<MessagePageJson> {
    const now = this.clock.now()
    checkThreadId(threadId)
    const req = parsePageQuery(query)
    const rows = await this.storage.messages.listThread(threadId, callerKey, req.after, req.limit + 1, now, now - this.retentionMs)
    return this.page(rows, req.limit, now)
  }

  /**
   * Recipient acknowledgement (WebSocket `ack`, docs/protocol.md §8): marks the message delivered.
   * Idempotent; an expired message stays expired. Unknown ids and messages the caller did not receive
   * → 404. `changed` tells whether this ack delivered it.
   */
  async ack(recipientKey: string, messageId: string): Promise<{ message_id: string; status: MessageStatus; changed: boolean }> {
    const now = this.clock.now()
    const row = await this.readable(recipientKey, messageId, now)
    if (row.recipientKey !== recipientKey) throw notFound()
    const changed = await this.deliverRow(row, now)
    return { message_id: row.messageId, status: effectiveStatus(row, now), changed }
  }

  /**
   * Unexpired `sent` messages for `recipientKey`, oldest first, after the given position, without
   * changing them: the backlog a push channel sends (docs/protocol.md §8.3). Serialize with `messageToJson`.
   */
  async pendingFor(recipientKey: string, opts: { afterCreatedAt?: number; afterId?: string; limit: number }): Promise<MessageRecord[]> {
    const now = this.clock.now()
    const after = opts.afterCreatedAt === undefined ? null : { createdAt: opts.afterCreatedAt, messageId: opts.afterId ?? '' }
    return this.storage.messages.listInbox(recipientKey, { status: 'sent' }, after, opts.limit, now, now - this.retentionMs)
  }

  /** The stored record of a message, whatever its state (for delivery channels); null when gone. */
  findRow(messageId: string): Promise<MessageRecord | null> {
    return this.storage.messages.find(messageId)
  }

  // --- internals ---

  /** docs/protocol.md §4.3 checks 1–6 and the row to store; errors carry the sender's rate headers. */
  private async prepareSend(sender: AgentRecord, input: unknown): Promise<PreparedSend> {
    const now = this.clock.now()
    const senderKey = sender.publicKey
    let rate: RateInfo | null = null
    try {
      const req = parseSendInput(input)
      if (this.requireEncryption) assertEncryptedShape(req, 'relay')
      const attachments = req.attachments.length ? await this.resolveAttachments(senderKey, req.attachments, now) : []
      rate = await this.limiter.enforce('send', senderKey, now)
      await this.admit(senderKey, req)
      const row: MessageRecord = {
        messageId: newMessageId(now),
        senderKey,
        recipientKey: req.recipientKey,
        contentType: req.contentType,
        body: req.bodyText,
        attachments: attachments.length ? JSON.stringify(attachments) : null,
        threadId: req.threadId ?? (req.inReplyTo === null ? null : await this.inheritedThread(senderKey, req.inReplyTo, now)),
        inReplyTo: req.inReplyTo,
        metadata: req.metadataText,
        status: 'sent',
        createdAt: now,
        expiresAt: now + req.expiresInMs,
        deliveredAt: null,
      }
      return { row, blobIds: attachments.map((a) => a.blob_id), rate }
    } catch (err) {
      throw withRateHeaders(err, rate ?? (await this.limiter.peek('send', senderKey, now)))
    }
  }

  /**
   * docs/protocol.md §4.3 step 6. A self-send is always accepted; an unknown recipient is accepted. A
   * recipient whose profile asks for encrypted messages only gets them (422 `encryption_required`),
   * checked after its inbox policy so a refused sender learns nothing of the profile.
   */
  private async admit(senderKey: string, req: SendRequest): Promise<void> {
    const recipientKey = req.recipientKey
    if (recipientKey === senderKey) return
    // the agent record, as the authenticator reads it: served from the agent cache on the hot path
    const recipient = await this.storage.agents.find(recipientKey)
    if (!recipient) return
    if (recipient.status === 'suspended') throw new RelayError('forbidden', 'The recipient is suspended')
    if (!(await this.acl.admits(recipientKey, recipient.inboxPolicy, senderKey))) {
      throw new RelayError('acl_denied', "The recipient's inbox policy does not accept messages from you")
    }
    if (inboxRequiresEncryption(recipient.metadata)) assertEncryptedShape(req, 'recipient')
  }

  /** docs/protocol.md §4.3: a reply without thread_id joins the thread of the message it answers, if readable. */
  private async inheritedThread(senderKey: string, inReplyTo: string, now: number): Promise<string | null> {
    const parent = await this.storage.messages.find(inReplyTo)
    if (!parent || !this.canRead(parent, senderKey, now)) return null
    return parent.threadId
  }

  private async insertWithFreshId(tx: Stores, message: MessageRecord, blobIds: string[]): Promise<void> {
    // 48 random bits per second: a collision is all but impossible, but never answer 500 for one
    for (let attempt = 0; !(await tx.messages.insert(message, blobIds)); attempt++) {
      if (attempt >= 3) throw new RelayError('internal_error', 'Could not allocate a message id')
      message.messageId = newMessageId(message.createdAt)
    }
    const distinct = blobIds.length > 1 ? [...new Set(blobIds)] : blobIds
    for (const hook of this.insertHooks) {
      const pending = hook(tx, message, distinct)
      if (pending) await pending
    }
  }

  /** Whether the message still exists for readers and `key` is its sender or recipient. */
  private canRead(row: MessageRecord, key: string, now: number): boolean {
    if (row.senderKey !== key && row.recipientKey !== key) return false
    if (row.expiresAt <= now - this.retentionMs) return false
    return !(row.status === 'delivered' && row.expiresAt <= now)
  }

  private async readable(callerKey: string, messageId: string, now: number): Promise<MessageRecord> {
    const row = await this.storage.messages.find(messageId)
    if (!row || !this.canRead(row, callerKey, now)) throw notFound()
    return row
  }

  /** Marks the message delivered if it is still `sent`; true when this call changed it. */
  private async deliverRow(row: MessageRecord, now: number): Promise<boolean> {
    if (row.status !== 'sent' || row.expiresAt <= now) return false
    if (!(await this.storage.messages.markDeliveredFor(row.messageId, row.recipientKey, now))) return false
    row.status = 'delivered'
    row.deliveredAt = now
    return true
  }

  private page(rows: MessageRecord[], limit: number, now: number): MessagePageJson {
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
