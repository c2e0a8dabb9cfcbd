/**
 * Blobs (docs/protocol.md §6): streamed, content-addressed uploads with quotas; reads by the owner and by the
 * parties of unexpired messages that attach a blob; deletion; and the attachment checks of message
 * sends (§4.3 check 4, §4.1). Framework-free: the HTTP routes hand in the body stream and a function
 * that finishes the signature check once the streamed hash is known.
 */
import { RelayError, badRequest } from '../errors.ts'
import type { Clock } from '../lib/clock.ts'
import { BLOB_ID_PATTERN, newBlobId } from '../lib/ids.ts'
import type { Logger } from '../lib/logger.ts'
import type { AttachmentResolver, ResolvedAttachment } from './attachments.ts'
import type { InsertHook } from './messages.ts'
import type { BlobRecord, MessageRecord } from './models/records.ts'
import { BlobTooLargeError, type BlobStore, type StagedBlob, type Storage, type Stores } from './ports.ts'
import { BLOB_CONTENT_TYPE_MAX, DEFAULT_BLOB_CONTENT_TYPE, blobToJson, type BlobJson } from './models/blob.ts'

export interface BlobLimits {
  maxSizeBytes: number
  quotaBytes: number
  /** Stored bytes over all agents (0 = no cap). */
  totalQuotaBytes?: number
  /** Free disk an upload must leave where bytes are stored (0 = none). */
  minFreeDiskBytes?: number
  unattachedTtlMs: number
}

/** Why the bytes of an upload were only hashed, not kept. */
type Refusal = 'quota' | 'total' | 'disk' | 'admission' | null

export interface BlobsServiceDeps {
  storage: Storage
  store: BlobStore
  clock: Clock
  logger: Logger
  limits: BlobLimits
  /** Bytes of every successful upload (metrics). */
  onUploaded?: (bytes: number) => void
  /** A record was removed: its content may now be unused (the sweep decides). */
  onRecordRemoved?: (hashHex: string) => void
  /** Whether a key may store anything at all (operator admission); asked before a byte is written. */
  admits?: (publicKey: string) => Promise<boolean>
}

export interface UploadInput {
  /** The raw request body, read here chunk by chunk. */
  body: ReadableStream<Uint8Array> | null
  contentLength: string | null
  contentType: string | null
  /** Query parameters of the request; blob uploads take none. */
  query: Record<string, unknown>
  /**
   * The public key the request claims. Used before the signature is checked only to decide whether
   * the bytes are worth writing to disk; nothing is kept and nothing is answered on its word.
   */
  claimedKey: string
  /** docs/protocol.md §1.2 steps 3–5 over the streamed body hash; resolves with the caller's public key. */
  verify: (bodyHashBase64Url: string) => Promise<string>
  /** Watches the body's rate while it is received: told its bytes, aborts a body that arrives too slowly. */
  rate?: BodyRateWatch
}

/** A minimum-rate watch over one upload's body (the request pipeline's). */
export interface BodyRateWatch {
  /** Starts the watch; the returned function ends it (once the body is received or has failed). */
  start(): () => void
  onBytes(receivedBytes: number): void
  /** Aborted with the error to answer (408) when the body falls below the rate. */
  signal: AbortSignal
}

export interface UploadOutcome {
  /** false when the caller already owned identical content (200 with that record). */
  created: boolean
  blob: BlobJson
  headers: Record<string, string>
}

/** What GET/HEAD serve: the record; the bytes come from `read`. */
export interface OpenedBlob {
  row: BlobRecord
}

/**
 * How long a claimed content is kept without a record (an upload places its bytes between its claim
 * and its record), and after which a cleanup that stopped half way loses its mark to a new upload.
 */
export const CONTENT_GRACE_MS = 10 * 60_000
/** How long an upload waits for a cleanup that is removing the same content. */
const CLAIM_WAIT_MS = 5000

const notFound = () => new RelayError('blob_not_found', 'No such blob, or not yours to read')

export class BlobsService {
  private readonly storage: Storage
  private readonly store: BlobStore
  private readonly clock: Clock
  private readonly logger: Logger
  private readonly limits: BlobLimits
  private readonly onUploaded: (bytes: number) => void
  private readonly onRecordRemoved: (hashHex: string) => void
  private readonly admits: (publicKey: string) => Promise<boolean>

  constructor(deps: BlobsServiceDeps) {
    this.storage = deps.storage
    this.store = deps.store
    this.clock = deps.clock
    this.logger = deps.logger
    this.limits = deps.limits
    this.onUploaded = deps.onUploaded ?? (() => {})
    this.onRecordRemoved = deps.onRecordRemoved ?? (() => {})
    this.admits = deps.admits ?? (async () => true)
  }

  /** `X-M2M-Storage-Used` / `X-M2M-Storage-Limit` (docs/protocol.md §6); `used` only once the caller is known. */
  storageHeaders(usedBytes?: number): Record<string, string> {
    const h: Record<string, string> = { 'X-M2M-Storage-Limit': String(this.limits.quotaBytes) }
    if (usedBytes !== undefined) h['X-M2M-Storage-Used'] = String(usedBytes)
    return h
  }

  /**
   * POST /v1/blobs (docs/protocol.md §6). In order: 413 at once when Content-Length exceeds the limit; the body
   * streamed to a temp file while hashed (413 as soon as it passes the limit, with or without
   * Content-Length); the signature checked against the streamed hash (401/409/403, nothing kept);
   * 400 for a bad content type or any query parameter; 200 with the existing record when the caller
   * already owns this content (its lifetime renewed); 507 when the new record would pass the quota;
   * else the bytes are placed (once per distinct hash) and a record created (201). Every answer carries
   * X-M2M-Storage-Limit; those given once the signature verified carry X-M2M-Storage-Used too.
   */
  async upload(input: UploadInput): Promise<UploadOutcome> {
    const { maxSizeBytes, quotaBytes } = this.limits
    const declared = parseContentLength(input.contentLength)
    if (declared !== null && declared > maxSizeBytes) throw this.tooLarge()
    // whether the bytes can possibly be kept, decided before the signature is checked on the claimed
    // key's word (nothing is answered on it, only disk spared): the key is admitted; within its quota,
    // or no larger than something it already has (identical content is answered from that record);
    // within the relay-wide cap; and the disk keeps its floor
    const now = this.clock.now()
    const totalCap = this.limits.totalQuotaBytes ?? 0
    const floor = this.limits.minFreeDiskBytes ?? 0
    const [admitted, before, total, free] = await Promise.all([
      this.admits(input.claimedKey),
      this.storage.blobs.usage(input.claimedKey, now),
      totalCap > 0 ? this.storage.blobs.totalUsage(now) : Promise.resolve(0),
      floor > 0 ? this.store.freeBytes() : Promise.resolve(null),
    ])
    let refusal: Refusal = null
    const keep = (received: number) => {
      const n = Math.max(received, declared ?? 0)
      if (!admitted) refusal = 'admission'
      else if (before.usedBytes + n > quotaBytes && n > before.largestBytes) refusal = 'quota'
      else if (totalCap > 0 && total + n > totalCap && n > before.largestBytes) refusal = 'total'
      else if (free !== null && free - n < floor) refusal = 'disk'
      return refusal === null
    }
    let staged: StagedBlob
    const { rate } = input
    const stopWatching = rate?.start()
    try {
      staged = await this.store.receive(input.body, { maxBytes: maxSizeBytes, keep, declaredBytes: declared, onBytes: rate?.onBytes, signal: rate?.signal })
    } catch (err) {
      if (err instanceof BlobTooLargeError) throw this.tooLarge()
      throw err
    } finally {
      stopWatching?.()
    }
    try {
      const owner = await input.verify(staged.hashBase64Url).catch((err) => {
        throw err instanceof RelayError ? new RelayError(err.code, err.message, err.details, { ...err.headers, ...this.storageHeaders() }) : err
      })
      const contentType = await this.checkRequest(input, owner)
      const existing = await this.storage.transaction((tx) => this.decide(tx, owner, staged, contentType, false, refusal))
      if (existing) {
        // answered from the owner's existing record: these bytes are not needed
        await this.store.discard(staged)
        this.onUploaded(staged.size)
        return existing
      }
      // claimed first, so that no cleanup removes the bytes between their placing and the record
      await this.claimContent(staged)
      await this.store.place(staged)
      const outcome = (await this.storage.transaction((tx) => this.decide(tx, owner, staged, contentType, true, refusal))) as UploadOutcome
      this.onUploaded(staged.size)
      return outcome
    } catch (err) {
      await this.store.discard(staged)
      throw err
    }
  }

  /** Claims the content of an upload, waiting (briefly) for a cleanup that is removing it. */
  private async claimContent(staged: StagedBlob): Promise<void> {
    const deadline = performance.now() + CLAIM_WAIT_MS
    for (;;) {
      const now = this.clock.now()
      if (await this.storage.blobs.claimContent(staged.hashHex, staged.size, now, now - CONTENT_GRACE_MS)) return
      if (performance.now() > deadline) throw new RelayError('service_unavailable', 'The blob store is busy; retry shortly', null, { 'Retry-After': '1' })
      await new Promise((r) => setTimeout(r, 50))
    }
  }

  /**
   * The decision of an upload whose caller is known, in one unit of work: the existing record when the
   * owner already has this content (lifetime renewed, 200), else the quota (507), else — when
   * `insert` — the new record (201). Without `insert` it returns null where a record would be created
   * (the bytes must be placed first).
   */
  private async decide(tx: Stores, owner: string, blob: StagedBlob, contentType: string, insert: boolean, refusal: Refusal): Promise<UploadOutcome | null> {
    const now = this.clock.now()
    const existing = await tx.blobs.ownedByHash(owner, blob.hashHex, now)
    if (existing) {
      await tx.blobs.extendExpiry(existing.blobId, owner, now + this.limits.unattachedTtlMs, now)
      const row = (await tx.blobs.find(existing.blobId)) as BlobRecord
      return { created: false, blob: blobToJson(row), headers: this.storageHeaders((await tx.blobs.usage(owner, now)).usedBytes) }
    }
    const used = (await tx.blobs.usage(owner, now)).usedBytes
    const totalCap = this.limits.totalQuotaBytes ?? 0
    if (refusal === 'disk') {
      throw new RelayError('insufficient_storage', 'The relay is low on disk space and takes no more blobs for now', null, this.storageHeaders(used))
    }
    if (refusal === 'total' || (totalCap > 0 && (await tx.blobs.totalUsage(now)) + blob.size > totalCap)) {
      throw new RelayError('insufficient_storage', "The relay's blob storage is full", { total_limit_bytes: totalCap }, this.storageHeaders(used))
    }
    if (blob.staging === null && used + blob.size <= this.limits.quotaBytes) {
      // within the quota, but the bytes were only hashed: uploads not yet verified filled their disk budget
      throw new RelayError('service_unavailable', 'Too many uploads in progress; retry shortly', null, { ...this.storageHeaders(used), 'Retry-After': '5' })
    }
    if (used + blob.size > this.limits.quotaBytes) {
      throw new RelayError(
        'insufficient_storage',
        `This blob (${blob.size} bytes) would exceed your storage quota: ${used} of ${this.limits.quotaBytes} bytes in use`,
        { size: blob.size, used_bytes: used, limit_bytes: this.limits.quotaBytes },
        this.storageHeaders(used),
      )
    }
    if (!insert) return null
    const row: BlobRecord = {
      blobId: newBlobId(),
      ownerKey: owner,
      hash: blob.hashHex,
      sizeBytes: blob.size,
      contentType,
      createdAt: now,
      expiresAt: now + this.limits.unattachedTtlMs,
    }
    await tx.blobs.insert(row)
    await tx.blobs.settleContent(blob.hashHex)
    return { created: true, blob: blobToJson(row), headers: this.storageHeaders(used + blob.size) }
  }

  /** 400 checks of an upload, made once the signature is verified (docs/protocol.md §1.2: 401 before 400). */
  private async checkRequest(input: UploadInput, owner: string): Promise<string> {
    const used = async () => (await this.storage.blobs.usage(owner, this.clock.now())).usedBytes
    const headers = async () => this.storageHeaders(await used())
    const names = Object.keys(input.query)
    if (names.length) {
      const e = badRequest('Invalid query parameters', Object.fromEntries(names.map((n) => [n, 'unknown parameter'])))
      throw new RelayError(e.code, e.message, e.details, await headers())
    }
    const type = input.contentType?.trim() || DEFAULT_BLOB_CONTENT_TYPE
    if (type.length > BLOB_CONTENT_TYPE_MAX) {
      throw new RelayError('bad_request', 'Invalid headers', { fields: { 'content-type': `must be at most ${BLOB_CONTENT_TYPE_MAX} characters` } }, await headers())
    }
    return type
  }

  private tooLarge(): RelayError {
    const limit = this.limits.maxSizeBytes
    return new RelayError('payload_too_large', `Blob exceeds the limit of ${limit} bytes`, { limit_bytes: limit }, this.storageHeaders())
  }

  /**
   * The blob for GET/HEAD: the owner and the sender and recipient of any unexpired message that
   * attaches it may read it; everyone else, and every id that is malformed, unknown or expired, gets
   * 404 blob_not_found (existence is not revealed). The id is checked before anything is looked up.
   */
  async open(callerKey: string, blobId: string): Promise<OpenedBlob> {
    if (!BLOB_ID_PATTERN.test(blobId)) throw notFound()
    const row = await this.storage.blobs.readableBy(blobId, callerKey, this.clock.now())
    if (!row) throw notFound()
    const size = await this.store.size(row.hash)
    if (size !== row.sizeBytes) {
      // the record outlived its bytes (a data directory restored without them, or tampered with)
      this.logger.error('blob file missing or of the wrong size', { blob_id: row.blobId, hash: row.hash, expected: row.sizeBytes, found: size })
      throw notFound()
    }
    return { row }
  }

  /** The bytes of an opened blob, whole or an inclusive range. */
  read(row: BlobRecord, range?: { start: number; end: number }): Promise<Blob | ReadableStream<Uint8Array>> {
    return this.store.read(row.hash, range)
  }

  /**
   * DELETE (docs/protocol.md §6): owner only — others get 404 if they cannot read it, else 403; 409
   * blob_referenced while an unexpired message attaches it. The bytes go with the sweep once no
   * record names them.
   */
  async delete(callerKey: string, blobId: string): Promise<void> {
    if (!BLOB_ID_PATTERN.test(blobId)) throw notFound()
    const row = await this.storage.transaction(async ({ blobs }) => {
      const now = this.clock.now()
      const readable = await blobs.readableBy(blobId, callerKey, now)
      if (!readable) throw notFound()
      if (readable.ownerKey !== callerKey) throw new RelayError('forbidden', 'Only the owner may delete a blob')
      if (await blobs.isReferenced(blobId, now)) {
        throw new RelayError('blob_referenced', 'The blob is attached to a message that has not expired', { blob_id: blobId })
      }
      await blobs.delete(blobId)
      return readable
    })
    this.onRecordRemoved(row.hash)
  }

  /**
   * docs/protocol.md §4.3 check 4 for message sends: every attachment names an unexpired blob of the sender
   * (else 422 naming the unusable blob ids, in order); content_type, size and hash come from the
   * record, the other fields are kept as given (§4.1).
   */
  readonly resolveAttachments: AttachmentResolver = async (senderKey, attachments, now) => {
    if (attachments.length === 0) return []
    const ids = [...new Set(attachments.map((a) => a.blob_id))]
    const usable = ids.filter((id) => BLOB_ID_PATTERN.test(id))
    const rows = new Map((await this.storage.blobs.ownedAmong(usable, senderKey, now)).map((r) => [r.blobId, r]))
    const bad = ids.filter((id) => !rows.has(id))
    if (bad.length) throw unusableBlobs(bad)
    return attachments.map((a): ResolvedAttachment => {
      const row = rows.get(a.blob_id) as BlobRecord
      // docs/protocol.md §4.1 field order
      return {
        blob_id: a.blob_id,
        ...(a.filename !== undefined ? { filename: a.filename } : {}),
        content_type: row.contentType,
        size: row.sizeBytes,
        hash: row.hash,
        encrypted: a.encrypted ?? false,
        ...(a.dek_enc !== undefined ? { dek_enc: a.dek_enc } : {}),
        ...(a.dek_ct !== undefined ? { dek_ct: a.dek_ct } : {}),
      }
    })
  }

  /**
   * In the send transaction: each attached blob now lives at least as long as the message (docs/protocol.md §6
   * Lifetime). A blob deleted or expired since the check refuses the send with the same 422.
   */
  readonly linkAttachments: InsertHook = (tx, message, blobIds) => (blobIds.length === 0 ? undefined : this.extendAttached(tx, message, blobIds))

  private async extendAttached(tx: Stores, message: MessageRecord, blobIds: readonly string[]): Promise<void> {
    const gone: string[] = []
    for (const id of blobIds) if (!(await tx.blobs.extendExpiry(id, message.senderKey, message.expiresAt, message.createdAt))) gone.push(id)
    if (gone.length) throw unusableBlobs(gone)
  }
}

function unusableBlobs(ids: string[]): RelayError {
  return new RelayError(
    'unprocessable_entity',
    `Attachment blob${ids.length > 1 ? 's' : ''} not found, expired or not yours: ${ids.join(', ')}`,
    { blob_ids: ids },
  )
}

/** A declared Content-Length as a number; null when absent or not a plain decimal count (Bun frames the body anyway). */
export function parseContentLength(value: string | null): number | null {
  if (value === null || !/^\d{1,16}$/.test(value.trim())) return null
  return Number(value.trim())
}
