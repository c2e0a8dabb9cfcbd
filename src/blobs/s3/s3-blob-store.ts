/**
 * Content-addressed bytes in an S3-compatible bucket (cluster mode), through Bun's built-in S3 client.
 *
 * Keys: `<prefix><aa>/<bb>/<sha256 hex>` for content, `<prefix>staging/<ms>-<random>` for uploads not
 * yet placed. An upload streams to its staging key while hashed — a single PUT when it is small, else
 * a multipart upload holding at most two parts in memory — and `place` copies it server-side to its
 * content key (or only deletes the staging when that content is already there with the right size).
 * A successful PUT, complete or copy is durable, so nothing else is flushed.
 *
 * Failures: an unreachable or overloaded store → RelayError `service_unavailable` (503, Retry-After);
 * anything else (access denied, no such bucket) → an Error naming the store and S3's code.
 */
import { randomBytes } from 'node:crypto'
import { S3Client, type NetworkSink } from 'bun'

import { RelayError } from '../../errors.ts'
import { systemClock, type Clock } from '../../lib/clock.ts'
import type { BlobStore, ReceiveOptions, StagedBlob } from '../../services/ports.ts'
import { assertContentHash, assertHashSlice, receiveError, receiveInto, SHA256_HEX, StagingBudget, type StagingSink } from '../receive-into.ts'
import { describeS3Location, parseS3Location, type S3Env, type S3Location } from './s3-location.ts'
import { encodeRfc3986, signSigV4 } from './sigv4.ts'

export interface S3BlobStoreOptions {
  /** Multipart part size: the memory one upload holds is about twice this. S3's minimum is 5 MiB. */
  partSizeBytes?: number
  /** Keys per ListObjectsV2 page (S3 returns at most 1000). */
  listPageSize?: number
  /** Largest object a single CopyObject may copy (S3: 5 GiB); larger ones are copied by streaming. */
  copyLimitBytes?: number
  /** Staging older than this is left by an upload that can no longer finish. */
  staleStagingMs?: number
  /** How long the start-up check and the readiness probe wait for an answer. */
  probeTimeoutMs?: number
  /**
   * Bytes that uploads may stage (in memory while a part gathers, then in the bucket) before their
   * signature is checked, over all uploads; beyond it, bytes are only hashed. RELAY_PREAUTH_DISK.
   */
  preAuthBytes?: number
}

/**
 * S3's minimum part size: an upload holds a part or two in memory (a 100 MiB upload measured ~41 MiB
 * peak RSS growth with 5 MiB parts against ~49 MiB with 8 MiB), and 10,000 parts still reach 48 GiB.
 */
const PART_SIZE_BYTES = 5 * 1024 * 1024
const LIST_PAGE_SIZE = 1000
/** S3's limit for one CopyObject. */
const COPY_LIMIT_BYTES = 5 * 1024 ** 3
/** No upload takes an hour (request timeouts are far shorter); older staging is left over. */
const STALE_STAGING_MS = 60 * 60 * 1000
/** A store that has not answered a small list and write by then is down for readiness and start-up. */
const PROBE_TIMEOUT_MS = 10_000
/** Seconds a client is asked to wait when the store is unreachable: a restart or failover of it. */
const RETRY_AFTER_S = '5'
/** Codes of Bun's S3 client (and S3) that mean the store cannot be reached or is overloaded now. */
const UNAVAILABLE = new Set([
  'ConnectionRefused',
  'ConnectionClosed',
  'ConnectionReset',
  'ConnectionTimedOut',
  'DNSResolveFailed',
  'FailedToOpenSocket',
  'UnableToConnect',
  'Timeout',
  'TimeoutError',
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
  'InternalError',
  'ServiceUnavailable',
  'SlowDown',
  'RequestTimeout',
  // Bun's code for an answer without an S3 error document: a proxy's or load balancer's 5xx page
  'UnknownError',
])

const STAGING = 'staging/'
const CONTENT_KEY = /^([0-9a-f]{2})\/([0-9a-f]{2})\/([0-9a-f]{64})$/

/** The store of `RELAY_BLOB_STORE=s3://bucket/prefix` with the AWS variables in `env`; ConfigError when invalid. */
export function s3StoreFromUrl(url: string, env: S3Env, clock: Clock, opts: S3BlobStoreOptions = {}): S3BlobStore {
  return new S3BlobStore(parseS3Location(url, env), clock, opts)
}

export class S3BlobStore implements BlobStore {
  readonly kind = 's3'
  /** `s3://bucket/prefix at endpoint`, for logs and errors. */
  readonly name: string
  private readonly client: S3Client
  private readonly partSize: number
  private readonly listPageSize: number
  private readonly copyLimit: number
  private readonly staleMs: number
  private readonly probeTimeoutMs: number
  /** Staging keys of this instance's uploads not yet placed or discarded: never stale. */
  private readonly staged = new Set<string>()
  private readonly budget: StagingBudget
  private uploadsInFlight = 0

  constructor(
    readonly location: S3Location,
    private readonly clock: Clock,
    opts: S3BlobStoreOptions = {},
  ) {
    this.name = describeS3Location(location)
    this.partSize = opts.partSizeBytes ?? PART_SIZE_BYTES
    this.listPageSize = opts.listPageSize ?? LIST_PAGE_SIZE
    this.copyLimit = opts.copyLimitBytes ?? COPY_LIMIT_BYTES
    this.staleMs = opts.staleStagingMs ?? STALE_STAGING_MS
    this.probeTimeoutMs = opts.probeTimeoutMs ?? PROBE_TIMEOUT_MS
    this.budget = new StagingBudget(opts.preAuthBytes)
    this.client = new S3Client({
      bucket: location.bucket,
      endpoint: location.endpoint,
      virtualHostedStyle: location.virtualHostedStyle,
      region: location.region,
      accessKeyId: location.accessKeyId,
      secretAccessKey: location.secretAccessKey,
      ...(location.sessionToken ? { sessionToken: location.sessionToken } : {}),
    })
  }

  /** Uploads currently streaming to the bucket (health details). */
  get inFlight(): number {
    return this.uploadsInFlight
  }

  /** Bytes staged by uploads not yet placed or discarded: the pre-auth budget in use. */
  get unverifiedBytes(): number {
    return this.budget.bytes
  }

  /** The key of a content hash; for this store and its tests only. */
  keyOf(hashHex: string): string {
    assertContentHash(hashHex)
    return `${this.location.prefix}${hashHex.slice(0, 2)}/${hashHex.slice(2, 4)}/${hashHex}`
  }

  async receive(body: ReadableStream<Uint8Array> | null, opts: ReceiveOptions): Promise<StagedBlob> {
    const key = `${this.location.prefix}${STAGING}${this.clock.now()}-${randomBytes(12).toString('hex')}`
    this.uploadsInFlight++
    this.staged.add(key)
    try {
      const staged = await receiveInto(body, opts, async () => new BucketSink(this, key), this.budget, key)
      if (staged.staging === null) this.staged.delete(key)
      return staged
    } catch (err) {
      this.staged.delete(key)
      this.budget.release(key)
      throw receiveError(err)
    } finally {
      this.uploadsInFlight--
    }
  }

  /**
   * Copies the staging object to its content key inside the store, unless that content is already
   * there with the right size; then deletes the staging.
   */
  async place(staged: StagedBlob): Promise<void> {
    const staging = this.stagingKey(staged)
    const target = this.keyOf(staged.hashHex)
    // the signature was checked before this is called: the bytes no longer count as unverified
    this.budget.release(staging)
    try {
      if ((await this.size(staged.hashHex)) !== staged.size) {
        if (staged.size <= this.copyLimit) await this.copyObject(staging, target)
        else await this.streamCopy(staging, target)
      }
      await this.deleteKey(staging)
    } finally {
      this.staged.delete(staging)
    }
  }

  async discard(staged: StagedBlob): Promise<void> {
    if (staged.staging === null) return
    const staging = this.stagingKey(staged)
    this.budget.release(staging)
    this.staged.delete(staging)
    await this.deleteKey(staging)
  }

  async size(hashHex: string): Promise<number | null> {
    const key = this.keyOf(hashHex)
    try {
      return (await this.client.file(key).stat()).size
    } catch (err) {
      const code = (err as { code?: string }).code
      if (code === 'NoSuchKey' || code === 'NotFound') return null
      throw this.failure(err)
    }
  }

  /** A stream of the object or of the inclusive range (an HTTP Range request); bytes flow as they arrive. */
  async read(hashHex: string, range?: { start: number; end: number }): Promise<ReadableStream<Uint8Array>> {
    const file = this.client.file(this.keyOf(hashHex))
    if (!range) return file.stream()
    return exactly(file.slice(range.start, range.end + 1).stream(), range.end - range.start + 1)
  }

  async delete(hashHex: string): Promise<void> {
    const key = this.keyOf(hashHex)
    await this.deleteKey(key)
  }

  /** Pages through ListObjectsV2 under `<prefix><aa>/`; keys that are not a hash in its right place are left out. */
  async *list(prefix: string): AsyncIterable<string> {
    assertHashSlice(prefix)
    for await (const { key } of this.objects(`${this.location.prefix}${prefix}/`)) {
      const m = CONTENT_KEY.exec(key.slice(this.location.prefix.length))
      if (m && m[3].startsWith(m[1] + m[2]) && m[1] === prefix) yield m[3]
    }
  }

  /** Removes staging objects older than an hour (by the time in their name) that this instance does not hold. */
  async removeStaleStaging(): Promise<number> {
    const staging = `${this.location.prefix}${STAGING}`
    const cutoff = this.clock.now() - this.staleMs
    const stale: string[] = []
    for await (const { key, lastModified } of this.objects(staging)) {
      if (this.staged.has(key)) continue
      const named = /^(\d{10,})-/.exec(key.slice(staging.length))
      const createdMs = named ? Number(named[1]) : lastModified ? Date.parse(lastModified) : Number.NaN
      if (createdMs < cutoff) stale.push(key)
    }
    for (const key of stale) await this.deleteKey(key)
    return stale.length
  }

  async freeBytes(): Promise<number | null> {
    return null
  }

  /**
   * Readiness does not wait on the bucket: messages, sockets and webhooks work without it, and every
   * instance shares it, so an outage would take them all out of the load balancer at once. Health
   * details report it (`problem`) and uploads and downloads answer 503 meanwhile.
   */
  async ready(): Promise<string | null> {
    return null
  }

  /** Writes and deletes a small staging object: what every upload will need. */
  async problem(): Promise<string | null> {
    const err = await this.probe(() => this.probeWrite())
    return err === null ? null : `${this.name}: ${reasonOf(err)}`
  }

  /**
   * The start-up check: lists and writes under the prefix. Throws an Error with one line naming the
   * bucket and the endpoint when the store cannot be used.
   */
  async check(): Promise<void> {
    let err: unknown = null
    // a store that answers but fails once (an internal error, a throttled request) gets two more tries
    for (const pause of [0, 250, 750]) {
      if (pause) await new Promise((r) => setTimeout(r, pause))
      err = await this.probe(async () => {
        try {
          await this.client.list({ prefix: this.location.prefix, maxKeys: 1 })
        } catch (e) {
          return e ?? new Error('unknown failure')
        }
        return this.probeWrite()
      })
      if (err === null) return
    }
    throw new Error(`blob store ${this.name} cannot be used: ${reasonOf(err)}`)
  }

  // --- for BucketSink ---

  /** Bun's client for one staging key, with this store's part size. */
  writerOf(key: string): NetworkSink {
    return this.client.file(key).writer({ partSize: this.partSize, queueSize: 1 })
  }

  put(key: string, bytes: Blob): Promise<unknown> {
    return this.call(() => this.client.write(key, bytes))
  }

  deleteKey(key: string): Promise<void> {
    return this.call(() => this.client.delete(key))
  }

  get partSizeBytes(): number {
    return this.partSize
  }

  /** Runs one S3 call; its failure as this store reports failures. */
  async call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn()
    } catch (err) {
      throw this.failure(err)
    }
  }

  // --- internals ---

  /**
   * Runs a check that resolves with its failure or null, within the probe timeout: a store that takes
   * connections but never answers (or a firewall dropping them) is reported rather than waited on.
   */
  private async probe(check: () => Promise<unknown>): Promise<unknown> {
    let timer: ReturnType<typeof setTimeout> | undefined
    const timeout = new Promise<unknown>((resolve) => {
      timer = setTimeout(() => resolve(new Error(`unreachable (no answer within ${this.probeTimeoutMs} ms)`)), this.probeTimeoutMs)
    })
    try {
      return await Promise.race([check(), timeout])
    } finally {
      clearTimeout(timer)
    }
  }

  /** Null when a small object could be written and deleted, else the failure. */
  private async probeWrite(): Promise<unknown> {
    const key = `${this.location.prefix}${STAGING}${this.clock.now()}-ready-${randomBytes(6).toString('hex')}`
    try {
      await this.client.write(key, 'ready')
      await this.client.delete(key)
      return null
    } catch (err) {
      return err ?? new Error('unknown failure')
    }
  }

  private failure(err: unknown): unknown {
    if (err instanceof RelayError) return err
    const code = (err as { code?: string })?.code
    if (code !== undefined && UNAVAILABLE.has(code)) {
      return new RelayError('service_unavailable', 'The blob store is unavailable; retry later', null, { 'Retry-After': RETRY_AFTER_S })
    }
    return new Error(`blob store ${this.name}: ${reasonOf(err)}`, { cause: err })
  }

  private stagingKey(staged: StagedBlob): string {
    const key = staged.staging
    if (key === null || !key.startsWith(`${this.location.prefix}${STAGING}`) || !SHA256_HEX.test(staged.hashHex)) {
      throw new Error(`not a staging object of this store: ${String(key).slice(0, 200)}`)
    }
    return key
  }

  /** Every object under `prefix`, page by page. */
  private async *objects(prefix: string): AsyncIterable<{ key: string; lastModified?: string }> {
    let continuationToken: string | undefined
    do {
      const page = await this.call(() => this.client.list({ prefix, maxKeys: this.listPageSize, ...(continuationToken ? { continuationToken } : {}) }))
      for (const o of page.contents ?? []) yield { key: o.key, lastModified: o.lastModified }
      continuationToken = page.isTruncated ? page.nextContinuationToken : undefined
    } while (continuationToken)
  }

  private urlOf(key: string): string {
    const path = key.split('/').map(encodeRfc3986).join('/')
    const { endpoint, bucket, virtualHostedStyle } = this.location
    return virtualHostedStyle ? `${endpoint}/${path}` : `${endpoint}/${bucket}/${path}`
  }

  /**
   * CopyObject, signed here because Bun's client has no copy. S3 may answer 200 and still report an
   * error in the body (a copy that failed after it started), so the body is read either way.
   */
  private async copyObject(source: string, target: string): Promise<void> {
    const { bucket } = this.location
    const url = this.urlOf(target)
    const headers = signSigV4(
      { method: 'PUT', url, headers: { 'x-amz-copy-source': `/${bucket}/${source.split('/').map(encodeRfc3986).join('/')}` } },
      this.location,
      // the store checks signatures against its own time, whatever clock the relay runs on
      systemClock.now(),
    )
    let res: Response
    let text: string
    try {
      res = await fetch(url, { method: 'PUT', headers })
      text = await res.text()
    } catch (err) {
      // fetch rejects only when no answer came: the store is unreachable
      throw new RelayError('service_unavailable', 'The blob store is unavailable; retry later', null, { 'Retry-After': RETRY_AFTER_S })
    }
    const code = /<Code>([^<]*)<\/Code>/.exec(text)?.[1]
    if (res.ok && !/<Error>/.test(text)) return
    const message = /<Message>([^<]*)<\/Message>/.exec(text)?.[1] ?? `HTTP ${res.status}`
    if (!code && res.status >= 500) throw this.failure({ code: 'ServiceUnavailable' })
    throw this.failure(Object.assign(new Error(message), { code: code ?? `HTTP${res.status}` }))
  }

  /** A copy through this process, for objects larger than one CopyObject may copy; memory as an upload. */
  private async streamCopy(source: string, target: string): Promise<void> {
    const sink = new BucketSink(this, target)
    const reader = this.client.file(source).stream().getReader()
    try {
      for (;;) {
        const { done, value } = await reader.read()
        if (done) break
        await sink.write(value)
      }
      await sink.finish()
    } catch (err) {
      reader.cancel().catch(() => {})
      await sink.abort()
      throw this.failure(err)
    }
  }
}

/**
 * One upload's bytes on their way to a key. Bytes are held until a part's worth has arrived (a small
 * upload is then one PUT, and one that is dropped early costs no request); from there on a multipart
 * upload takes them, a part at a time, so memory stays at about one part (and its copy being sent).
 */
class BucketSink implements StagingSink {
  private held: Uint8Array[] = []
  private heldBytes = 0
  private writer: NetworkSink | null = null
  private unflushed = 0
  private total = 0
  private putTried = false

  constructor(
    private readonly store: S3BlobStore,
    private readonly key: string,
  ) {}

  /** Parts cannot be smaller than 5 MiB: what gathers waits for a whole part (and counts against the budget). */
  readonly gathered = 0

  async idle(): Promise<void> {}

  async write(chunk: Uint8Array): Promise<void> {
    this.total += chunk.byteLength
    if (!this.writer) {
      this.held.push(chunk)
      this.heldBytes += chunk.byteLength
      if (this.heldBytes < this.store.partSizeBytes) return
      this.writer = this.store.writerOf(this.key)
      for (const c of this.held) this.writer.write(c)
      this.unflushed = this.heldBytes
      this.held = []
      this.heldBytes = 0
    } else {
      this.writer.write(chunk)
      this.unflushed += chunk.byteLength
    }
    if (this.unflushed < this.store.partSizeBytes) return
    // the writer buffers whatever it is given and its write never waits: waiting here until the part
    // is sent is what bounds memory (the client's bytes wait in the socket meanwhile)
    this.unflushed = 0
    const writer = this.writer
    await this.store.call(async () => writer.flush())
  }

  async finish(): Promise<string> {
    if (!this.writer) {
      this.putTried = true
      await this.store.put(this.key, new Blob(this.held as Uint8Array<ArrayBuffer>[]))
      this.held = []
      return this.key
    }
    const writer = this.writer
    const written = await this.store.call(async () => writer.end())
    if (written !== this.total) throw new Error(`blob store ${this.store.name}: stored ${written} of ${this.total} bytes at ${this.key}`)
    return this.key
  }

  async drop(): Promise<void> {
    this.held = []
    this.heldBytes = 0
    const writer = this.writer
    if (!writer) return
    this.writer = null
    // Bun's writer has no abort: the upload is completed, then its object deleted
    await Promise.resolve(writer.end()).catch(() => {})
    await this.store.deleteKey(this.key)
  }

  async abort(): Promise<void> {
    await this.drop().catch(() => {})
    // a PUT whose answer was lost may still have stored the object (a PUT is made only without a writer)
    if (this.putTried) await this.store.deleteKey(this.key).catch(() => {})
  }
}

/**
 * The first `length` bytes of `source`, an error if it ends sooner: the route has promised exactly that
 * many. Some S3-compatible servers answer a range of the first byte alone (bytes=0-0) with everything.
 */
function exactly(source: ReadableStream<Uint8Array>, length: number): ReadableStream<Uint8Array> {
  const reader = source.getReader()
  let left = length
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        const { done, value } = await reader.read()
        if (done) return controller.error(new Error(`the blob store sent ${length - left} of ${length} bytes`))
        const part = value.byteLength > left ? value.subarray(0, left) : value
        left -= part.byteLength
        controller.enqueue(part)
        if (left === 0) {
          reader.cancel().catch(() => {})
          controller.close()
        }
      },
      cancel: (reason) => reader.cancel(reason),
    },
    { highWaterMark: 0 },
  )
}

/** One line for logs and start-up: S3's code and message, or what kind of unreachable. */
function reasonOf(err: unknown): string {
  const e = err as { code?: string; message?: string } | null
  const message = String(e?.message ?? err).split('\n')[0]
  const code = e?.code
  if (!code) return message
  // Bun's network errors carry only their code
  if (UNAVAILABLE.has(code) && /unexpected error/i.test(message)) return `unreachable (${code})`
  return message.includes(code) ? message : `${code}: ${message}`
}
