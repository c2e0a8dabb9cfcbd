/**
 * The ports: what the services need from storage, declared by the services and implemented once per
 * backend (storage/sqlite: the embedded default; storage/postgres: cluster mode). Services import only
 * these interfaces and the records of models/records.ts — never a driver, a schema or a file path.
 *
 * Rules every implementation keeps (the contract suite in test/contract runs against each):
 * - Every method resolves once its effect is durable, or rejects. Failures of the engine are mapped to
 *   RelayError: a locked or unreachable database → `service_unavailable` (503, Retry-After), a full
 *   disk → `insufficient_storage` (507). Nothing else escapes as a driver error.
 * - Reads outside a transaction see committed data only.
 * - `transaction` runs its function as one atomic unit with the stores bound to it; the function must
 *   not wait on anything but those stores (no network, no files) — SQLite runs many units in one commit
 *   and PostgreSQL holds row locks while it runs.
 * - Methods take `now` from the caller; no implementation reads a clock or decides a rule.
 */
import type {
  AclEntryType,
  AclRecord,
  AgentChange,
  AgentProfileFields,
  AgentRecord,
  AgentStatus,
  BlobRecord,
  DiscoveryFilter,
  DiscoveryRecord,
  DueDelivery,
  InboxFilter,
  MessagePosition,
  MessageRecord,
  TagCount,
  WebhookRecord,
} from './models/records.ts'

export interface AgentStore {
  /** How many agent records exist (any status): the `maxAgents` cap. */
  count(): Promise<number>
  /** The record, or null for an unknown key. Implementations may cache; their own writes keep a cache exact. */
  find(publicKey: string): Promise<AgentRecord | null>
  /** Creates an agent with the default profile unless it exists; returns the stored record. */
  create(publicKey: string, now: number): Promise<AgentRecord>
  /**
   * Like `create`, but only while fewer than `maxAgents` records exist, decided atomically with the
   * insert (concurrent calls never overshoot, on any instance); null when the cap refused a new key.
   */
  createCapped(publicKey: string, now: number, maxAgents: number): Promise<AgentRecord | null>
  updateProfile(publicKey: string, fields: AgentProfileFields, now: number): Promise<void>
  /** Records activity (last_active_at). Callers coalesce; a cached record shows it at once. */
  touch(publicKey: string, now: number): Promise<void>
  /** Removes the agent record itself (the service removes what else it owns first). */
  delete(publicKey: string): Promise<void>
  /** Suspends a key, creating a suspended record for an unknown one. */
  suspend(publicKey: string, reason: string | null, now: number): Promise<void>
  /** False when the key has no record. */
  unsuspend(publicKey: string, now: number): Promise<boolean>
  /** Agents whose record changed after `since` (ms), oldest change first: how operator changes travel. */
  changedSince(since: number): Promise<AgentChange[]>
  /** Drops any cached copy (another process or instance changed the record). */
  invalidate(publicKey: string): void
}

/**
 * Where the expiry sweep resumes: an expiry time and an implementation-defined tie-breaker; a null key
 * means after every message expiring at `expiresAt`.
 */
export interface SweepCursor {
  expiresAt: number
  key: number | string | null
}

export interface ExpireBatchResult {
  scanned: number
  expired: number
  removed: number
  last: SweepCursor
}

export interface MessageStore {
  find(messageId: string): Promise<MessageRecord | null>
  /** Inserts a message and its blob links; false (nothing written) when the id is taken. */
  insert(message: MessageRecord, blobIds: readonly string[]): Promise<boolean>
  /**
   * Messages addressed to `recipientKey` that `filter.status` sees at `now`, after `after`, oldest first.
   * `cutoff` is the oldest expires_at an expired envelope may have and still exist.
   */
  listInbox(recipientKey: string, filter: InboxFilter, after: MessagePosition | null, limit: number, now: number, cutoff: number): Promise<MessageRecord[]>
  /** Messages of a thread that `participantKey` sent or received and that still exist, oldest first. */
  listThread(threadId: string, participantKey: string, after: MessagePosition | null, limit: number, now: number, cutoff: number): Promise<MessageRecord[]>
  /** Marks one message delivered if it is `recipientKey`'s, `sent` and unexpired; true when it changed. */
  markDeliveredFor(messageId: string, recipientKey: string, now: number): Promise<boolean>
  /** Marks the `sent`, unexpired ones among `ids` delivered; returns how many changed. */
  markDelivered(ids: readonly string[], now: number): Promise<number>
  /**
   * One sweep batch over messages with expires_at after `after` and at or before `now`: `sent` ones
   * become `expired` (body and attachment links dropped), `delivered` ones are removed.
   */
  expireBatch(after: SweepCursor, now: number, limit: number): Promise<ExpireBatchResult>
  /** Removes up to `limit` messages whose expires_at is at or before `cutoff`, whatever their status. */
  removeExpiredBatch(cutoff: number, limit: number): Promise<number>
  /** Removes every message addressed to `publicKey` (its agent was deleted). */
  removeAddressedTo(publicKey: string): Promise<number>
}

export interface AclStore {
  find(ownerKey: string, peerKey: string): Promise<AclRecord | null>
  /** The entry type `owner` set for `peer`, or null: the hot lookup of every send. */
  entryTypeFor(ownerKey: string, peerKey: string): Promise<AclEntryType | null>
  /** Newest first. */
  list(ownerKey: string, entryType?: AclEntryType): Promise<AclRecord[]>
  count(ownerKey: string): Promise<number>
  insert(ownerKey: string, peerKey: string, entryType: AclEntryType, now: number): Promise<AclRecord>
  setType(id: number, entryType: AclEntryType, now: number): Promise<void>
  /** False when there was no entry. */
  delete(ownerKey: string, peerKey: string): Promise<boolean>
  removeOwnedBy(ownerKey: string): Promise<number>
}

export interface BlobRecordStore {
  insert(record: BlobRecord): Promise<void>
  /** A record whatever its state; null when there is none. */
  find(blobId: string): Promise<BlobRecord | null>
  /** The owner's unexpired record of this content (the latest-expiring one), or null. */
  ownedByHash(ownerKey: string, hashHex: string, now: number): Promise<BlobRecord | null>
  /** Bytes of the owner's unexpired records (what counts against the quota) and the largest of them. */
  usage(ownerKey: string, now: number): Promise<{ usedBytes: number; largestBytes: number }>
  /** Bytes of every unexpired record, all owners together. */
  totalUsage(now: number): Promise<number>
  /** The unexpired record if `key` may read it (owner, or party of an unexpired message attaching it). */
  readableBy(blobId: string, key: string, now: number): Promise<BlobRecord | null>
  /** Whether an unexpired message attaches the blob. */
  isReferenced(blobId: string, now: number): Promise<boolean>
  delete(blobId: string): Promise<boolean>
  /** Moves the expiry to `expiresAt` unless already later; false if gone, not the owner's, or expired. */
  extendExpiry(blobId: string, ownerKey: string, expiresAt: number, now: number): Promise<boolean>
  /** The unexpired records among `blobIds` that `ownerKey` owns. */
  ownedAmong(blobIds: readonly string[], ownerKey: string, now: number): Promise<BlobRecord[]>
  /** Removes up to `limit` records expired at `now` that no unexpired message references; their hashes. */
  removeExpiredBatch(now: number, limit: number): Promise<string[]>
  /** Removes the owner's records that no unexpired message references (agent deleted); their hashes. */
  removeOwnedUnreferenced(ownerKey: string, now: number): Promise<string[]>
  /** Distinct contents named by records and their bytes: what the blob store should hold. */
  storedContents(): Promise<{ files: number; bytes: number }>

  // --- content bookkeeping: who may place and who may remove the bytes of a hash ---
  /**
   * Claims a content before its bytes are placed: the content is then kept for at least the grace
   * period of `markContentDeleting`, record or not. False while a cleanup is removing it (retry
   * shortly); a removal mark older than `staleDeletingBefore` is taken over.
   */
  claimContent(hashHex: string, sizeBytes: number, now: number, staleDeletingBefore: number): Promise<boolean>
  /**
   * Ends the claim of an upload whose record is now committed: from here on the records alone keep the
   * content (so deleting the last of them frees it at the next cleanup, without the grace period).
   */
  settleContent(hashHex: string): Promise<void>
  /**
   * Marks a content for removal if no record names it and it was not claimed after `claimedBefore`;
   * true when marked (its bytes may now be deleted, then `forgetContent`).
   */
  markContentDeleting(hashHex: string, claimedBefore: number, now: number): Promise<boolean>
  /** Forgets a content whose bytes were deleted (only if still marked). */
  forgetContent(hashHex: string): Promise<void>
  /** Contents left marked for removal (a cleanup stopped half way), oldest first. */
  contentsMarkedDeleting(limit: number): Promise<string[]>
  /** Whether the content is known (claimed or named by a record). */
  contentKnown(hashHex: string): Promise<boolean>
}

export interface WebhookStore {
  find(publicKey: string): Promise<WebhookRecord | null>
  /** Creates or replaces: enabled, no failures, created_at kept on replace. */
  upsert(publicKey: string, url: string, secret: string, now: number): Promise<WebhookRecord>
  /** Removes the webhook and its pending deliveries; false when there was none. */
  delete(publicKey: string): Promise<boolean>
  /** Removes the pending deliveries of one webhook; returns how many. */
  cancelDeliveries(publicKey: string): Promise<number>
  isEnabled(publicKey: string): Promise<boolean>
  /** Queues the first attempt of one message, due at `now`; a duplicate is ignored. */
  enqueue(deliveryId: string, publicKey: string, messageId: string, now: number): Promise<void>
  /**
   * Claims up to `limit` deliveries due at `now`, oldest first, skipping the webhooks in `exclude`: each
   * is not due again until `leaseUntil`, so no other dispatcher (or instance) attempts it meanwhile. An
   * attempt that never reports (a crash) is made again after the lease.
   */
  claimDue(now: number, exclude: readonly string[], limit: number, leaseUntil: number): Promise<DueDelivery[]>
  /** Gives back a claimed delivery that was not attempted: due again at `dueAt`. */
  release(deliveryId: string, dueAt: number): Promise<void>
  recordFailure(deliveryId: string, attempts: number, nextAttemptAt: number, error: string, now: number): Promise<void>
  /** Removes a delivery that is done (delivered, dropped or pointless). */
  finish(deliveryId: string): Promise<void>
  resetFailures(publicKey: string, now: number): Promise<void>
  /**
   * One more consecutive failure; the webhook is disabled (and its deliveries removed) when that reaches
   * `disableAfter`. Null when the webhook is gone.
   */
  addFailure(publicKey: string, disableAfter: number, now: number): Promise<{ enabled: boolean; consecutiveFailures: number } | null>
  pendingCount(): Promise<number>
  removeFor(publicKey: string): Promise<void>
}

/** A signature recorded by the replay guard; the answer must wait for `durable`. */
export interface ReplayReservation {
  durable: Promise<void>
}

export interface ReplayStore {
  /**
   * Records an accepted signature (its first 128 bits) until `expiresAt`. Null when it was recorded
   * before — a replay, on this instance or any other. Implementations may let the request go on before
   * the entry is durable; the answer must not leave before `durable` resolves.
   */
  reserve(signatureId: string, expiresAt: number): Promise<ReplayReservation | null>
  /**
   * Forgets every entry expired at `now`, so the log never outgrows its window whatever the request
   * rate; `limit` bounds what one statement deletes where a backend deletes in batches. Returns how many.
   */
  prune(now: number, limit: number): Promise<number>
}

export interface StateStore {
  /** A persisted number of the relay (e.g. a sweep watermark); null when never set. */
  getNumber(key: string): Promise<number | null>
  setNumber(key: string, value: number): Promise<void>
}

/** Sliding-window counters for rate limits: exact across every instance that shares the storage. */
export interface RateStore {
  /**
   * Counts `n` events (default 1) in `bucket` if the window ending at `now` then holds at most `limit`;
   * otherwise counts none. Returns whether they counted, the count in the window (including them), and
   * when the oldest counted event leaves the window (ms; `now` when the window is empty).
   */
  hit(bucket: string, limit: number, windowMs: number, now: number, n?: number): Promise<{ allowed: boolean; count: number; oldestAt: number }>
  /** The window as it stands, counting nothing. */
  peek(bucket: string, windowMs: number, now: number): Promise<{ count: number; oldestAt: number }>
  /** Forgets buckets with nothing left in their window; returns how many. */
  prune(windowMs: number, now: number): Promise<number>
}

export interface DiscoveryStore {
  /** Public, active agents matching every condition, newest activity first, at most `filter.limit`. */
  search(filter: DiscoveryFilter): Promise<DiscoveryRecord[]>
  /** Tags with their counts of public active agents, most used first, then by tag. */
  catalog(opts: { prefix: string; limit: number }): Promise<TagCount[]>
}

/** Keys the operator admitted (`relay admin allow`): the allowlist of the admission modes. */
export interface AdmissionStore {
  isAllowed(publicKey: string): Promise<boolean>
  /** True when the key was not listed before. */
  allow(publicKey: string, note: string | null, now: number): Promise<boolean>
  /** False when the key was not listed. */
  revoke(publicKey: string): Promise<boolean>
  /** Every admitted key, oldest first. */
  list(): Promise<{ publicKey: string; note: string | null; createdAt: number }[]>
  /** A number that changes whenever the list changes (running relays refresh their copy by it). */
  version(): Promise<number>
}

/** Figures about the whole relay for operators (admin stats, metrics), read on demand. */
export interface RelayFigures {
  agents: { active: number; suspended: number; total: number }
  /** By effective status at `now`. */
  messages: { sent: number; delivered: number; expired: number; total: number }
  blobs: {
    /** Unexpired blob records and the bytes they account for (what owners see against their quota). */
    records: number
    bytes: number
    /** Distinct contents stored (content-addressed: one per SHA-256), including not yet collected ones. */
    stored_files: number
    stored_bytes: number
  }
  webhooks: { enabled: number; disabled: number; pending_deliveries: number }
  database: { size_bytes: number; wal_bytes: number }
}

export interface StatsStore {
  figures(now: number): Promise<RelayFigures>
}

/** A webhook delivery not yet done, as the operator's queue view shows it. */
export interface QueuedDelivery {
  deliveryId: string
  publicKey: string
  messageId: string
  state: 'pending' | 'in_flight'
  attempts: number
  nextAttemptAt: number
  lastError: string | null
  createdAt: number
}

/**
 * Operator listings (relay admin, /v1/admin) that the stores above do not offer. Read-only, read
 * on demand, never on a request's hot path.
 */
export interface AdminQueries {
  /**
   * Agents oldest first (created_at, then public key), strictly after `after`, only those with
   * `status` when given; at most `limit`.
   */
  listAgents(opts: { status: AgentStatus | null; after: { createdAt: number; publicKey: string } | null; limit: number }): Promise<AgentRecord[]>
  /** Deliveries pending or in flight, the soonest due first (then by id); at most `limit`. */
  listQueuedDeliveries(limit: number): Promise<QueuedDelivery[]>
}

/** The stores a unit of work can touch. */
export interface Stores {
  agents: AgentStore
  messages: MessageStore
  acl: AclStore
  blobs: BlobRecordStore
  webhooks: WebhookStore
  state: StateStore
}

/** How a unit of work may be run (`Storage.transaction`). */
export interface UnitOptions {
  /**
   * The unit only adds rows that no other grouped unit reads or changes (accepting a message): a
   * backend may run it alongside other such units, their statements interleaved, in one shared
   * transaction. A unit that fails still fails alone; the others commit.
   */
  grouped?: boolean
}

export interface Storage extends Stores {
  /** `sqlite` or `postgres`: for health, metrics and logs only — no rule depends on it. */
  readonly kind: string
  admission: AdmissionStore
  stats: StatsStore
  /** Operator listings (agents by status, the webhook queue). */
  adminQueries: AdminQueries
  replay: ReplayStore
  rates: RateStore
  discovery: DiscoveryStore
  /**
   * Runs `fn` as one atomic unit of work with stores bound to it: committed when it resolves, rolled
   * back when it throws (the error is passed on). 503 when the database stays locked. `fn` may be run
   * more than once (a run the backend rolled back for reasons outside it is run again), so it acts only
   * through the stores; what it computes must come from its last run.
   */
  transaction<T>(fn: (tx: Stores) => Promise<T>, opts?: UnitOptions): Promise<T>
  /**
   * Runs a periodic job unless another instance is running the job with this name; resolves with
   * `ran: false` then. One instance at a time per job.
   */
  exclusive<T>(job: string, fn: () => Promise<T>): Promise<{ ran: true; value: T } | { ran: false }>
  /**
   * Background jobs that write in batches (the expiry sweep) await this between batches: it resolves
   * once the database has absorbed what they wrote (SQLite: its WAL checkpointed while they pause), so
   * that requests never wait behind that work. Absent where there is nothing to wait for.
   */
  caughtUp?(): Promise<void>
  /** Health figures of the database (component `database` of /v1/health/details). */
  health(): Promise<{ status: 'ok' | 'degraded' | 'down' } & Record<string, unknown>>
  /** Null when the database takes writes now; else why not (readiness). */
  ready(): Promise<string | null>
  /** Commits what is pending, then closes. */
  close(): Promise<void>
}

// --- blob bytes ---

/** Thrown by `BlobStore.receive` when the body passes `maxBytes`; nothing is kept. */
export class BlobTooLargeError extends Error {
  constructor(readonly limitBytes: number) {
    super(`Blob exceeds ${limitBytes} bytes`)
    this.name = 'BlobTooLargeError'
  }
}

export interface ReceiveOptions {
  /** Largest body accepted; one byte more stops the upload with BlobTooLargeError. */
  maxBytes: number
  /**
   * Asked as bytes arrive (with the count so far) whether they are still worth keeping; once it
   * answers false the rest is only hashed, never stored (an upload that cannot be kept is read to the
   * end so its signature can be checked, but costs no storage).
   */
  keep?: (receivedBytes: number) => boolean
  /** The size the request declares (Content-Length), when it does; at most `maxBytes`. */
  declaredBytes?: number | null
  /** Told the count of bytes received so far, as they arrive (a minimum-rate watch). */
  onBytes?: (receivedBytes: number) => void
  /** Once aborted, the upload stops (its reader cancelled) and fails with the signal's reason. */
  signal?: AbortSignal
}

/** Bytes received and hashed but not yet stored under their hash. */
export interface StagedBlob {
  /** SHA-256, lowercase hex: the content address. */
  hashHex: string
  /** SHA-256, unpadded base64url: the BODY_HASH of the request signature. */
  hashBase64Url: string
  size: number
  /** Where the store keeps the staged bytes; null when they were only hashed (nothing to place). */
  staging: string | null
}

/**
 * Content-addressed bytes: a directory (blobs/local) or an S3-compatible bucket (blobs/s3). Knows
 * bytes only; which hashes are wanted is the blob records' business (see BlobRecordStore's content
 * bookkeeping). Nothing above this interface sees a path or a key.
 */
export interface BlobStore {
  readonly kind: string
  /** Uploads streaming in now (health). */
  readonly inFlight: number
  /** Bytes staged by uploads whose signature is not checked yet: the pre-auth budget in use (health). */
  readonly unverifiedBytes: number
  /** Start-up: throws a one-line Error naming the store when it cannot be used. */
  check(): Promise<void>
  /**
   * Streams `body` into staging while hashing it, never holding it whole in memory; durable once it
   * resolves. On any failure (too large, the client went away, storage full) nothing is left behind.
   */
  receive(body: ReadableStream<Uint8Array> | null, opts: ReceiveOptions): Promise<StagedBlob>
  /**
   * Makes staged bytes the content of their hash (idempotent: identical content already stored is
   * kept, one of the wrong size is replaced); the staging is gone afterwards.
   */
  place(staged: StagedBlob): Promise<void>
  /** Drops staged bytes that will not be placed. */
  discard(staged: StagedBlob): Promise<void>
  /** Size of the stored content, or null when there is none. */
  size(hashHex: string): Promise<number | null>
  /**
   * The stored bytes, or the inclusive byte range of them: a stream, or a lazy Blob the server can
   * send without copying (a file slice, an S3 object).
   */
  read(hashHex: string, range?: { start: number; end: number }): Promise<Blob | ReadableStream<Uint8Array>>
  /** Removes the content (no error when it is already gone). */
  delete(hashHex: string): Promise<void>
  /** Hashes stored whose hex starts with `prefix` (two hex characters: one of 256 slices). */
  list(prefix: string): AsyncIterable<string>
  /** Removes staging left by uploads that can no longer finish; returns how many. */
  removeStaleStaging(): Promise<number>
  /** Free bytes where the store writes, or null when unknown (a bucket). */
  freeBytes(): Promise<number | null>
  /** Null when the store takes writes now; else why not (readiness). */
  ready(): Promise<string | null>
  /**
   * Null when the store takes writes now, else why not: health details report it as degraded when
   * `ready` does not count it (a shared bucket: messaging works without it, uploads answer 503).
   */
  problem?(): Promise<string | null>
}

// --- signals between the parts of one relay, and between instances ---

export interface Signals {
  /**
   * Announces a committed message: listeners on this instance get the record at once, other instances
   * (cluster mode) get a notice after the commit and read it.
   */
  messageCommitted(message: MessageRecord): void
  /** `local` when this instance committed the message, `remote` when another one did. */
  onMessage(listener: (message: MessageRecord, origin: 'local' | 'remote') => void): void
  /** An agent was deleted or suspended (here or on another instance): close its sockets. */
  agentGone(publicKey: string, reason: 'deleted' | 'suspended'): void
  onAgentGone(listener: (publicKey: string, reason: 'deleted' | 'suspended') => void): void
  /**
   * Which recipients this instance has listeners for (its open sockets): a message another instance
   * committed for anyone else is not read here. Without a filter every remote message is read.
   */
  wantRecipients(filter: (recipientKey: string) => boolean): void
  /**
   * Notices may have been lost (the link to the other instances dropped and came back): listeners
   * re-read what they need (sockets resync their backlog).
   */
  onResync(listener: () => void): void
  close(): Promise<void>
}

/** Open WebSockets per agent, counted over every instance (the per-agent limit). */
export interface ConnectionRegistry {
  /** Registers a connection unless the agent already has `limit`; false when refused. */
  tryAdd(publicKey: string, connectionId: string, limit: number, now: number): Promise<boolean>
  remove(publicKey: string, connectionId: string): Promise<void>
  /** Keeps this instance's connections counted (cluster mode expires those of a dead instance). */
  heartbeat(now: number): Promise<void>
}
