import { RelayError } from '../errors.ts'
import type { PreAuthHold } from './preauth.ts'

const tooLarge = (limit: number) =>
  new RelayError('payload_too_large', `Request body exceeds ${limit} bytes`, { limit_bytes: limit })

export interface BodyReadOptions {
  /** Counts the bytes buffered while the request is not yet authenticated; refuses past its budget. */
  hold?: PreAuthHold
  /** The whole body must arrive by its deadline, else 408 (slow senders cannot hold memory). */
  deadlines?: BodyDeadlines
}

/**
 * Deadlines of the bodies being read, checked by one timer that runs only while some are pending
 * (a timer per request costs more than the check). A body is refused at most one tick after its
 * deadline: a tenth of the timeout, between 10 and 250 ms.
 */
export class BodyDeadlines {
  private readonly pending = new Set<{ at: number; expire: () => void }>()
  private timer: ReturnType<typeof setInterval> | undefined
  private readonly tickMs: number

  constructor(readonly timeoutMs: number) {
    this.tickMs = Math.max(10, Math.min(250, Math.floor(timeoutMs / 10)))
  }

  /** `read`, or 408 once the deadline has passed (then `cancel` stops the read). */
  watch<T>(read: Promise<T>, cancel: () => void): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const entry = {
        at: performance.now() + this.timeoutMs,
        expire: () => {
          cancel()
          reject(new RelayError('request_timeout', `The request body did not arrive within ${Math.round(this.timeoutMs / 100) / 10} s`))
        },
      }
      this.pending.add(entry)
      this.timer ??= setInterval(() => this.check(), this.tickMs)
      read.then(
        (value) => {
          this.pending.delete(entry)
          resolve(value)
        },
        (err) => {
          this.pending.delete(entry)
          reject(err)
        },
      )
    })
  }

  private check(): void {
    const now = performance.now()
    for (const entry of this.pending) {
      if (entry.at > now) continue
      this.pending.delete(entry)
      entry.expire()
    }
    if (this.pending.size === 0) {
      clearInterval(this.timer)
      this.timer = undefined
    }
  }
}

/**
 * Reads the whole body up to `limit` bytes: refuses at once when Content-Length says it is larger,
 * and stops reading a chunked body as soon as it passes the limit (docs/protocol.md §4.3 check 1). The bytes are
 * held against the pre-auth budget before they are buffered (all of a declared length at once, a
 * chunked body chunk by chunk). When the answer is given without the rest of the body, the runtime
 * reads and discards that rest without buffering it, so the client still receives the answer.
 */
export async function readRawBody(request: Request, limit: number, opts: BodyReadOptions = {}): Promise<Uint8Array> {
  const declared = request.headers.get('content-length')
  let cancel = () => {}
  let read: Promise<Uint8Array>
  if (declared !== null) {
    const length = Number(declared)
    if (length > limit) throw tooLarge(limit)
    if (length === 0) return new Uint8Array(0)
    opts.hold?.take(length)
    // with a declared length the runtime buffers the body itself: no stream is made for it
    read = request.arrayBuffer().then((b) => new Uint8Array(b))
  } else {
    if (!request.body) return new Uint8Array(0)
    const reader = (request.body as ReadableStream<Uint8Array>).getReader() as ReadableStreamDefaultReader<Uint8Array>
    cancel = () => void reader.cancel().catch(() => {})
    read = readChunks(reader, limit, opts.hold)
  }
  read = read.catch((err) => {
    cancel()
    throw err instanceof RelayError ? err : new RelayError('bad_request', 'The request body ended before it was complete')
  })
  if (!opts.deadlines) return read
  read.catch(() => {}) // a late failure after the deadline answered is nobody's business
  return opts.deadlines.watch(read, cancel)
}

async function readChunks(reader: ReadableStreamDefaultReader<Uint8Array>, limit: number, hold?: PreAuthHold): Promise<Uint8Array> {
  const chunks: Uint8Array[] = []
  let total = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    total += value.length
    if (total > limit) throw tooLarge(limit)
    hold?.take(value.length)
    chunks.push(value)
  }
  return Buffer.concat(chunks)
}

