/**
 * What every blob store does the same way while an upload arrives: hash the bytes as they come, stop
 * at the size limit, ask `keep()` whether they are still worth storing, keep what unverified uploads
 * stage within the pre-auth budget, and leave nothing behind on failure. Where the bytes go is the
 * store's business, through a StagingSink (a temp file, a multipart upload to a bucket).
 */
import { RelayError } from '../errors.ts'
import { BlobTooLargeError, type ReceiveOptions, type StagedBlob } from '../services/ports.ts'

/** SHA-256, lowercase hex: a content address. */
export const SHA256_HEX = /^[0-9a-f]{64}$/
/** A slice of the address space for `list`: the first two hex characters of a hash. */
export const HASH_SLICE = /^[0-9a-f]{2}$/

/** Throws unless `hashHex` is a content address (a caller's bug, never a client's input). */
export function assertContentHash(hashHex: string): void {
  if (!SHA256_HEX.test(hashHex)) throw new Error(`not a SHA-256 hex digest: ${String(hashHex).slice(0, 80)}`)
}

export function assertHashSlice(prefix: string): void {
  if (!HASH_SLICE.test(prefix)) throw new Error(`not a two-character hex prefix: ${String(prefix).slice(0, 80)}`)
}

/** The staged blob of a finished digest. */
export function stagedBlob(digest: Buffer, size: number, staging: string | null): StagedBlob {
  return { hashHex: digest.toString('hex'), hashBase64Url: digest.toString('base64url'), size, staging }
}

/**
 * Bytes staged by uploads whose signature is not checked yet (`receive` ends before the check; `place`
 * and `discard` end the upload), over all uploads of one store. Beyond the limit, bytes are only
 * hashed, never stored.
 */
export class StagingBudget {
  private readonly held = new Map<string, number>()
  private total = 0

  constructor(readonly limitBytes = Number.POSITIVE_INFINITY) {}

  /** Bytes staged by uploads not yet placed or discarded (health, tests). */
  get bytes(): number {
    return this.total
  }

  /** Counts `bytes` more for the staging `id` when the budget has room; false when it has not. */
  claim(id: string, bytes: number): boolean {
    if (this.total + bytes > this.limitBytes) return false
    this.total += bytes
    this.held.set(id, (this.held.get(id) ?? 0) + bytes)
    return true
  }

  release(id: string): void {
    const n = this.held.get(id)
    if (n === undefined) return
    this.total -= n
    this.held.delete(id)
  }
}

/** Where the bytes of one upload go while it arrives. */
export interface StagingSink {
  /** Takes the next bytes; a returned promise holds the reader back until the store has room. */
  write(chunk: Uint8Array): Promise<void> | void
  /** Bytes taken but still held in memory that `idle` could store now (0 when it cannot). */
  readonly gathered: number
  /** The client paused: store what is gathered rather than hold it in memory while it waits. */
  idle(): Promise<void>
  /** Stops storing and removes what was stored; the rest of the upload is only hashed. */
  drop(): Promise<void>
  /** Every byte was given: makes them durable, resolves with the staging name. */
  finish(): Promise<string>
  /** The upload failed: removes whatever was stored (never rejects). */
  abort(): Promise<void>
}

/**
 * Reads `body` to its end into the sink that `open` creates, while hashing it. BlobTooLargeError as
 * soon as it passes `opts.maxBytes`; once `opts.keep` answers false or `budget` has no room for the
 * next bytes, the sink is dropped and the rest only hashed (`staging: null`). On any failure the sink
 * is aborted, the budget released and the reader cancelled before the error propagates.
 */
export async function receiveInto(
  body: ReadableStream<Uint8Array> | null,
  opts: ReceiveOptions,
  open: () => Promise<StagingSink>,
  budget: StagingBudget,
  id: string,
): Promise<StagedBlob> {
  const hasher = new Bun.CryptoHasher('sha256')
  // reading starts before anything is awaited: bytes the runtime has to queue for a reader that is
  // not there yet grow a buffer it keeps for the rest of the request (~0.5 MiB per stalled upload)
  const reader = body?.getReader()
  let first = reader?.read()
  first?.catch(() => {})
  // an abort (a body below the minimum rate) ends a pending read at once; the read loop then fails
  const onAbort = () => void reader?.cancel().catch(() => {})
  opts.signal?.addEventListener('abort', onAbort, { once: true })
  // bytes that cannot be kept from the start (a key the relay does not admit, a full quota) are only
  // hashed: no sink is even opened for them (no empty temp file, no request to a bucket)
  let sink: StagingSink | null = null
  try {
    if (!opts.keep || opts.keep(opts.declaredBytes ?? 0)) sink = await open()
  } catch (err) {
    opts.signal?.removeEventListener('abort', onAbort)
    reader?.cancel().catch(() => {})
    throw err
  }
  let size = 0
  try {
    if (reader) {
      for (;;) {
        const next = first ?? reader.read()
        first = undefined
        if (sink && sink.gathered > 0 && (await stillPending(next))) {
          // the client paused: a slow upload, signed or not, then holds storage within the budget, not memory
          await sink.idle()
        }
        const { done, value } = await next
        if (opts.signal?.aborted) throw opts.signal.reason
        if (done) break
        if (value.byteLength === 0) continue
        size += value.byteLength
        opts.onBytes?.(size)
        if (size > opts.maxBytes) throw new BlobTooLargeError(opts.maxBytes)
        hasher.update(value)
        if (sink && ((opts.keep && !opts.keep(size)) || !budget.claim(id, value.byteLength))) {
          // no longer worth storing, or over the pre-auth budget: drop what was stored, keep hashing
          const dropped = sink
          sink = null
          await dropped.drop()
          budget.release(id)
        }
        if (sink) await sink.write(value)
      }
    }
    const staging = sink ? await sink.finish() : null
    return stagedBlob(hasher.digest(), size, staging)
  } catch (err) {
    reader?.cancel().catch(() => {})
    await sink?.abort()
    budget.release(id)
    throw err
  } finally {
    opts.signal?.removeEventListener('abort', onAbort)
  }
}

/**
 * What a failed receive means to the client: a body cut off (the client went away or broke the framing)
 * is its request's fault, a full disk is the relay's (507, retry later); anything else stays as it is.
 */
export function receiveError(err: unknown): unknown {
  if (err instanceof BlobTooLargeError || err instanceof RelayError) return err
  const e = err as { code?: string; name?: string; message?: string }
  if (e?.code === 'ENOSPC' || e?.code === 'EDQUOT') {
    return new RelayError('insufficient_storage', 'The relay has no disk space left for this upload; retry later', null, { 'Retry-After': '60' })
  }
  if (e?.name === 'AbortError' || /connection was closed|aborted/i.test(e?.message ?? '')) {
    return new RelayError('bad_request', 'The upload ended before it was complete')
  }
  return err
}

const PENDING = Symbol('pending')

/** Whether `p` is still unsettled now (a settled promise wins the race: its reaction is queued first). */
async function stillPending(p: Promise<unknown>): Promise<boolean> {
  try {
    return (await Promise.race([p, Promise.resolve(PENDING)])) === PENDING
  } catch {
    return false
  }
}
