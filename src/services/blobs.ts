/**
 * Blobs (SPEC §6): streamed, content-addressed uploads with quotas; reads by the owner and by the
 * parties of unexpired messages that attach a blob; deletion; and the attachment checks of message
 * sends (§4.3 check 4, §4.1). Framework-free: the HTTP routes hand in the body stream and a function
 * that finishes the signature check once the streamed hash is known.
 */
import { BlobTooLargeError, type BlobStore, type ReceivedBlob } from '../blobs/blob-store.ts'
import { RelayError, badRequest } from '../errors.ts'
import type { Clock } from '../lib/clock.ts'
import { BLOB_ID_PATTERN, newBlobId } from '../lib/ids.ts'
import type { Logger } from '../lib/logger.ts'
import type { BlobRow, BlobsRepo } from '../storage/blobs-repo.ts'
import type { AttachmentResolver, ResolvedAttachment } from './attachments.ts'
import type { InsertHook } from './messages.ts'
import { BLOB_CONTENT_TYPE_MAX, DEFAULT_BLOB_CONTENT_TYPE, blobToJson, type BlobJson } from './models/blob.ts'

export interface BlobLimits {
  maxSizeBytes: number
  quotaBytes: number
  unattachedTtlMs: number
}

export interface BlobsServiceDeps {
  repo: BlobsRepo
  store: BlobStore
  clock: Clock
  logger: Logger
  limits: BlobLimits
  /** Bytes of every successful upload (metrics). */
  onUploaded?: (bytes: number) => void
  /** A record was removed: its content may now be unused (the sweep decides). */
  onRecordRemoved?: (hashHex: string) => void
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
  /** SPEC §1.2 steps 3–5 over the streamed body hash; resolves with the caller's public key. */
  verify: (bodyHashBase64Url: string) => Promise<string>
}

export interface UploadOutcome {
  /** false when the caller already owned identical content (200 with that record). */
  created: boolean
  blob: BlobJson
  headers: Record<string, string>
}

/** What GET/HEAD serve: the record and where its bytes are. */
export interface OpenedBlob {
  row: BlobRow
  path: string
}

const notFound = () => new RelayError('blob_not_found', 'No such blob, or not yours to read')

export class BlobsService {
  private readonly repo: BlobsRepo
  private readonly store: BlobStore
  private readonly clock: Clock
  private readonly logger: Logger
  private readonly limits: BlobLimits
  private readonly onUploaded: (bytes: number) => void
  private readonly onRecordRemoved: (hashHex: string) => void

  constructor(deps: BlobsServiceDeps) {
    this.repo = deps.repo
    this.store = deps.store
    this.clock = deps.clock
    this.logger = deps.logger
    this.limits = deps.limits
    this.onUploaded = deps.onUploaded ?? (() => {})
    this.onRecordRemoved = deps.onRecordRemoved ?? (() => {})
  }

  /** `X-M2M-Storage-Used` / `X-M2M-Storage-Limit` (SPEC §6); `used` only once the caller is known. */
  storageHeaders(usedBytes?: number): Record<string, string> {
    const h: Record<string, string> = { 'X-M2M-Storage-Limit': String(this.limits.quotaBytes) }
    if (usedBytes !== undefined) h['X-M2M-Storage-Used'] = String(usedBytes)
    return h
  }

  /**
   * POST /v1/blobs (SPEC §6). In order: 413 at once when Content-Length exceeds the limit; the body
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
    // whether the bytes can possibly be kept: within the quota, or no larger than something the
    // claimed owner already has (identical content is answered from the existing record)
    const before = this.repo.usage(input.claimedKey, this.clock.now())
    const keep = (received: number) => {
      const n = Math.max(received, declared ?? 0)
      return before.usedBytes + n <= quotaBytes || n <= before.largestBytes
    }
    let received: ReceivedBlob
    try {
      received = await this.store.receive(input.body, { maxBytes: maxSizeBytes, keep, declaredBytes: declared })
    } catch (err) {
      if (err instanceof BlobTooLargeError) throw this.tooLarge()
      throw err
    }
    let pinned = false
    try {
      const owner = await input.verify(received.hashBase64Url).catch((err) => {
        throw err instanceof RelayError ? new RelayError(err.code, err.message, err.details, { ...err.headers, ...this.storageHeaders() }) : err
      })
      const contentType = this.checkRequest(input, owner)
      this.store.pin(received.hashHex)
      pinned = true
      let outcome = this.commitRecord(owner, received, contentType, false)
      if (outcome) {
        // answered from the owner's existing record: these bytes are not needed
        await this.store.discard(received.tempPath)
      } else {
        if (received.tempPath) await this.store.place(received.tempPath, received.hashHex, received.size)
        outcome = this.commitRecord(owner, received, contentType, true) as UploadOutcome
      }
      this.onUploaded(received.size)
      return outcome
    } catch (err) {
      await this.store.discard(received.tempPath)
      throw err
    } finally {
      if (pinned) {
        this.store.unpin(received.hashHex)
        // a refused upload may have placed content nobody names
        this.store.removeIfUnused(received.hashHex, (h) => this.repo.hashInUse(h))
      }
    }
  }

  /**
   * The decision of an upload whose caller is known, in one synchronous transaction: the existing
   * record when the owner already has this content (lifetime renewed, 200), else the quota (507),
   * else — when `insert` — the new record (201). Without `insert` it returns null where a record would
   * be created (the bytes must be placed first).
   */
  private commitRecord(owner: string, blob: ReceivedBlob, contentType: string, insert: boolean): UploadOutcome | null {
    return this.repo.transaction(() => {
      const now = this.clock.now()
      const existing = this.repo.ownedByHash(owner, blob.hashHex, now)
      if (existing) {
        this.repo.extendExpiry(existing.blobId, owner, now + this.limits.unattachedTtlMs, now)
        const row = this.repo.find(existing.blobId) as BlobRow
        return { created: false, blob: blobToJson(row), headers: this.storageHeaders(this.repo.usage(owner, now).usedBytes) }
      }
      const used = this.repo.usage(owner, now).usedBytes
      if (used + blob.size > this.limits.quotaBytes || blob.tempPath === null) {
        throw new RelayError(
          'insufficient_storage',
          `This blob (${blob.size} bytes) would exceed your storage quota: ${used} of ${this.limits.quotaBytes} bytes in use`,
          { size: blob.size, used_bytes: used, limit_bytes: this.limits.quotaBytes },
          this.storageHeaders(used),
        )
      }
      if (!insert) return null
      const row: BlobRow = {
        blobId: newBlobId(),
        ownerKey: owner,
        hash: blob.hashHex,
        sizeBytes: blob.size,
        contentType,
        createdAt: now,
        expiresAt: now + this.limits.unattachedTtlMs,
      }
      this.repo.insert(row)
      return { created: true, blob: blobToJson(row), headers: this.storageHeaders(used + blob.size) }
    })
  }

  /** 400 checks of an upload, made once the signature is verified (SPEC §1.2: 401 before 400). */
  private checkRequest(input: UploadInput, owner: string): string {
    const headers = () => this.storageHeaders(this.repo.usage(owner, this.clock.now()).usedBytes)
    const names = Object.keys(input.query)
    if (names.length) {
      const e = badRequest('Invalid query parameters', Object.fromEntries(names.map((n) => [n, 'unknown parameter'])))
      throw new RelayError(e.code, e.message, e.details, headers())
    }
    const type = input.contentType?.trim() || DEFAULT_BLOB_CONTENT_TYPE
    if (type.length > BLOB_CONTENT_TYPE_MAX) {
      throw new RelayError('bad_request', 'Invalid headers', { fields: { 'content-type': `must be at most ${BLOB_CONTENT_TYPE_MAX} characters` } }, headers())
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
    const row = this.repo.readableBy(blobId, callerKey, this.clock.now())
    if (!row) throw notFound()
    const size = await this.store.sizeOf(row.hash)
    if (size !== row.sizeBytes) {
      // the record outlived its bytes (a data directory restored without them, or tampered with)
      this.logger.error('blob file missing or of the wrong size', { blob_id: row.blobId, hash: row.hash, expected: row.sizeBytes, found: size })
      throw notFound()
    }
    return { row, path: this.store.pathOf(row.hash) }
  }

  /**
   * DELETE (SPEC §6): owner only — others get 404 if they cannot read it, else 403; 409
   * blob_referenced while an unexpired message attaches it. The bytes go with the sweep once no
   * record names them.
   */
  delete(callerKey: string, blobId: string): void {
    if (!BLOB_ID_PATTERN.test(blobId)) throw notFound()
    const row = this.repo.transaction(() => {
      const now = this.clock.now()
      const readable = this.repo.readableBy(blobId, callerKey, now)
      if (!readable) throw notFound()
      if (readable.ownerKey !== callerKey) throw new RelayError('forbidden', 'Only the owner may delete a blob')
      if (this.repo.isReferenced(blobId, now)) {
        throw new RelayError('blob_referenced', 'The blob is attached to a message that has not expired', { blob_id: blobId })
      }
      this.repo.delete(blobId)
      return readable
    })
    this.onRecordRemoved(row.hash)
  }

  /**
   * SPEC §4.3 check 4 for message sends: every attachment names an unexpired blob of the sender
   * (else 422 naming the unusable blob ids, in order); content_type, size and hash come from the
   * record, the other fields are kept as given (§4.1).
   */
  readonly resolveAttachments: AttachmentResolver = (senderKey, attachments, now) => {
    if (attachments.length === 0) return []
    const ids = [...new Set(attachments.map((a) => a.blob_id))]
    const usable = ids.filter((id) => BLOB_ID_PATTERN.test(id))
    const rows = new Map(this.repo.ownedAmong(usable, senderKey, now).map((r) => [r.blobId, r]))
    const bad = ids.filter((id) => !rows.has(id))
    if (bad.length) throw unusableBlobs(bad)
    return attachments.map((a): ResolvedAttachment => {
      const row = rows.get(a.blob_id) as BlobRow
      // SPEC §4.1 field order
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
   * In the send transaction: each attached blob now lives at least as long as the message (SPEC §6
   * Lifetime). A blob deleted or expired since the check refuses the send with the same 422.
   */
  readonly linkAttachments: InsertHook = (message, blobIds) => {
    if (blobIds.length === 0) return
    const gone = blobIds.filter((id) => !this.repo.extendExpiry(id, message.senderKey, message.expiresAt, message.createdAt))
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

/** Content-Length as a number; null when absent or not a plain decimal (Bun frames the body anyway). */
function parseContentLength(value: string | null): number | null {
  if (value === null || !/^\d{1,16}$/.test(value.trim())) return null
  return Number(value.trim())
}
