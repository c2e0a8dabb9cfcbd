import { RelayError } from '../errors.ts'
import type { BodyRateWatch } from '../services/blobs.ts'
import type { PreAuthHold } from './preauth.ts'

const tooLarge = (limit: number) =>
  new RelayError('payload_too_large', `Request body exceeds ${limit} bytes`, { limit_bytes: limit })

/**
 * Bodies declared this small are read whole by the runtime (no stream: cheaper) and held at their
 * declared length from the start; a larger one is read as a stream and held as its bytes arrive, so a
 * client that declares 2 MiB and sends one byte holds one byte.
 */
const WHOLE_READ_MAX_BYTES = 16 * 1024
/**
 * The slowest a body may arrive, after a grace for the first round trips: slower is cut with 408 and
 * what it held released. A 2 MiB body at this rate takes about 4 minutes, so only a sender that stalls
 * on purpose (or a link far slower than any agent's) meets it; the whole-body deadline still applies.
 */
export const BODY_MIN_BYTES_PER_S = 8 * 1024
export const BODY_RATE_GRACE_MS = 2000

export interface BodyReadOptions {
  /** Counts the bytes buffered while the request is not yet authenticated; refuses past its budget. */
  hold?: PreAuthHold
  /** The body must keep arriving at the minimum rate and be whole by the deadline, else 408. */
  deadlines?: BodyDeadlines
}

/** How much of a body has arrived, for the rate check. */
interface Progress {
  received: number
  /** The declared length; null for a chunked body. */
  expected: number | null
}

interface Watched {
  startedAt: number
  at: number
  progress: Progress
  expire: (why: 'deadline' | 'rate') => void
}

/**
 * Deadlines and minimum rates of the bodies being read, checked by one timer that runs only while
 * some are pending (a timer per request costs more than the check). A body is refused at most one tick
 * after it falls behind: a tenth of the timeout, between 10 and 250 ms.
 */
export class BodyDeadlines {
  private readonly pending = new Set<Watched>()
  private timer: ReturnType<typeof setInterval> | undefined
  private readonly tickMs: number

  constructor(
    readonly timeoutMs: number,
    readonly minBytesPerS = BODY_MIN_BYTES_PER_S,
    readonly graceMs = BODY_RATE_GRACE_MS,
  ) {
    this.tickMs = Math.max(10, Math.min(250, Math.floor(timeoutMs / 10)))
  }

  /** `read`, or 408 once the deadline has passed or the body fell below the rate (then `cancel` stops the read). */
  watch<T>(read: Promise<T>, cancel: () => void, progress: Progress): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const startedAt = performance.now()
      const entry: Watched = {
        startedAt,
        at: startedAt + this.timeoutMs,
        progress,
        expire: (why) => {
          cancel()
          reject(
            why === 'deadline'
              ? new RelayError('request_timeout', `The request body did not arrive within ${Math.round(this.timeoutMs / 100) / 10} s`)
              : new RelayError('request_timeout', `The request body arrives too slowly (under ${this.minBytesPerS} bytes per second)`, { min_bytes_per_s: this.minBytesPerS }),
          )
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
      const why = entry.at <= now ? 'deadline' : this.tooSlow(entry, now) ? 'rate' : null
      if (!why) continue
      this.pending.delete(entry)
      entry.expire(why)
    }
    if (this.pending.size === 0) {
      clearInterval(this.timer)
      this.timer = undefined
    }
  }

  private tooSlow({ startedAt, progress }: Watched, now: number): boolean {
    if (this.minBytesPerS <= 0) return false
    const owed = ((now - startedAt - this.graceMs) / 1000) * this.minBytesPerS
    if (owed <= 0) return false
    return progress.received < Math.min(owed, progress.expected ?? Infinity)
  }
}

/**
 * Reads the whole body up to `limit` bytes: refuses at once when Content-Length says it is larger,
 * and stops reading a chunked body as soon as it passes the limit (docs/protocol.md §4.3 check 1). The bytes are
 * held against the pre-auth budget as they arrive (a small declared body at once). When the answer is
 * given without the rest of the body, the runtime reads and discards that rest without buffering it,
 * so the client still receives the answer.
 */
export async function readRawBody(request: Request, limit: number, opts: BodyReadOptions = {}): Promise<Uint8Array> {
  const declared = request.headers.get('content-length')
  const progress: Progress = { received: 0, expected: null }
  let cancel = () => {}
  let read: Promise<Uint8Array>
  if (declared !== null && Number(declared) <= WHOLE_READ_MAX_BYTES) {
    const length = Number(declared)
    if (length === 0) return new Uint8Array(0)
    opts.hold?.take(length)
    progress.expected = length
    // with a small declared length the runtime buffers the body itself: no stream is made for it
    read = request.arrayBuffer().then((b) => {
      progress.received = b.byteLength
      return new Uint8Array(b)
    })
  } else {
    if (declared !== null) {
      progress.expected = Number(declared)
      if (progress.expected > limit) throw tooLarge(limit)
    }
    if (!request.body) return new Uint8Array(0)
    const reader = (request.body as ReadableStream<Uint8Array>).getReader() as ReadableStreamDefaultReader<Uint8Array>
    cancel = () => void reader.cancel().catch(() => {})
    read = readChunks(reader, limit, progress, opts.hold)
  }
  read = read.catch((err) => {
    cancel()
    throw err instanceof RelayError ? err : new RelayError('bad_request', 'The request body ended before it was complete')
  })
  if (!opts.deadlines) return read
  read.catch(() => {}) // a late failure after the deadline answered is nobody's business
  return opts.deadlines.watch(read, cancel, progress)
}

/**
 * A minimum-rate watch for a body read elsewhere (an upload, streamed by its route): told the bytes as
 * they arrive, it aborts its signal with 408 once the body falls below the rate of `deadlines`.
 */
export function watchRate(deadlines: BodyDeadlines, declaredBytes: number | null): BodyRateWatch {
  const controller = new AbortController()
  const progress: Progress = { received: 0, expected: declaredBytes }
  return {
    signal: controller.signal,
    onBytes: (n) => {
      progress.received = n
    },
    start: () => {
      let end = () => {}
      const ended = new Promise<void>((resolve) => (end = resolve))
      deadlines.watch(ended, () => {}, progress).catch((err) => controller.abort(err))
      return end
    },
  }
}

async function readChunks(reader: ReadableStreamDefaultReader<Uint8Array>, limit: number, progress: Progress, hold?: PreAuthHold): Promise<Uint8Array> {
  const chunks: Uint8Array[] = []
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    if (progress.received + value.length > limit) throw tooLarge(limit)
    hold?.take(value.length)
    progress.received += value.length
    chunks.push(value)
  }
  if (progress.expected !== null && progress.received !== progress.expected) throw new RelayError('bad_request', 'The request body ended before it was complete')
  return Buffer.concat(chunks)
}

/**
 * Lingering close, as nginx does it, where the runtime would not: a request that says `Connection:
 * close` and whose body the relay answers without reading (401, 413, 429, 503 before the body) would have
 * its connection closed as soon as the answer is written, with the client still writing — it then sees
 * EPIPE or ECONNRESET instead of the answer (the reset discards what the client had not read yet). So
 * the answer is sent at once, and the connection stays open while the rest of the body comes in:
 *
 * - a body declared no larger than LINGER_READ_MAX_BYTES is read and dropped until it ends, the client
 *   has sent nothing for LINGER_IDLE_MS, or LINGER_MAX_MS have passed (each chunk read is an allocation
 *   collected later, so at most LINGER_READ_MAX_REQUESTS are read at once);
 * - a larger body (an upload refused before its body), one that passes LINGER_READ_MAX_BYTES, or one
 *   beyond that many at once is cancelled, after which the runtime drops its bytes as they arrive
 *   without handing them over (no memory), and the answer is held open for LINGER_HOLD_MS: time for any
 *   client to read its answer (it cannot be told when the client has stopped writing).
 *
 * On a kept-alive connection the runtime itself reads and drops the rest. Beyond LINGER_MAX_REQUESTS at
 * once the connection is closed at once, as before.
 */
const LINGER_READ_MAX_BYTES = 8 * 1024 * 1024
const LINGER_READ_MAX_REQUESTS = 16
const LINGER_MAX_MS = 10_000
const LINGER_IDLE_MS = 2_000
const LINGER_HOLD_MS = 3_000
const LINGER_MAX_REQUESTS = 256
let lingering = 0
let reading = 0

const IDLE = Symbol('idle')
const timeout = (ms: number) => {
  let timer: ReturnType<typeof setTimeout> | undefined
  const done = new Promise<typeof IDLE>((resolve) => (timer = setTimeout(resolve, ms, IDLE)))
  return { done, clear: () => clearTimeout(timer) }
}

/** `response`, or the same answer followed by the discarded rest of `request`'s unread body (see above). */
export async function lingerAfter(response: Response, request: Request): Promise<Response> {
  const body = request.body
  if (!body || request.bodyUsed || request.method === 'HEAD' || lingering >= LINGER_MAX_REQUESTS) return response
  if (!/\bclose\b/i.test(request.headers.get('connection') ?? '') || request.headers.has('expect')) return response
  const declared = request.headers.get('content-length')
  const read = (declared === null || Number(declared) <= LINGER_READ_MAX_BYTES) && reading < LINGER_READ_MAX_REQUESTS
  const reader = (body as ReadableStream<Uint8Array>).getReader() as ReadableStreamDefaultReader<Uint8Array>
  const answer = new Uint8Array(await response.arrayBuffer())
  lingering++
  if (read) reading++
  const stream = new ReadableStream<Uint8Array>({
    async start(controller) {
      let ended = false
      try {
        // the whole answer first (its length is declared, so the client has it at once)
        controller.enqueue(answer)
        const started = performance.now()
        let bytes = 0
        while (read) {
          const idle = timeout(LINGER_IDLE_MS)
          const next = await Promise.race([reader.read(), idle.done])
          idle.clear()
          // a client that stopped writing has its answer: the connection may close without a reset
          if (next === IDLE || next.done) {
            ended = true
            break
          }
          bytes += next.value.length
          if (bytes > LINGER_READ_MAX_BYTES || performance.now() - started > LINGER_MAX_MS) break
        }
      } catch {
        // the client went away or broke the framing: nothing more to read
        ended = true
      } finally {
        if (read) reading--
      }
      reader.cancel().catch(() => {})
      if (!ended) await timeout(LINGER_HOLD_MS).done
      lingering--
      try {
        controller.close()
      } catch {
        // the client went away meanwhile: the answer's stream is already cancelled
      }
    },
  })
  const headers = new Headers(response.headers)
  headers.set('content-length', String(answer.length))
  return new Response(stream, { status: response.status, headers })
}
