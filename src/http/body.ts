import { RelayError } from '../errors.ts'
import type { PreAuthHold } from './preauth.ts'

const tooLarge = (limit: number) =>
  new RelayError('payload_too_large', `Request body exceeds ${limit} bytes`, { limit_bytes: limit })

export interface BodyReadOptions {
  /** Counts the bytes buffered while the request is not yet authenticated; refuses past its budget. */
  hold?: PreAuthHold
  /** The whole body must arrive within this many ms, else 408 (slow senders cannot hold memory). */
  timeoutMs?: number
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
  if (declared !== null && Number(declared) > limit) throw tooLarge(limit)
  if (!request.body) return new Uint8Array(0)
  let cancel = () => {}
  let read: Promise<Uint8Array>
  if (declared !== null) {
    opts.hold?.take(Number(declared))
    read = request.arrayBuffer().then((b) => new Uint8Array(b))
  } else {
    const reader = (request.body as ReadableStream<Uint8Array>).getReader() as ReadableStreamDefaultReader<Uint8Array>
    cancel = () => void reader.cancel().catch(() => {})
    read = readChunks(reader, limit, opts.hold)
  }
  read = read.catch((err) => {
    cancel()
    throw err instanceof RelayError ? err : new RelayError('bad_request', 'The request body ended before it was complete')
  })
  if (!opts.timeoutMs) return read
  let timer: ReturnType<typeof setTimeout> | undefined
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      cancel()
      reject(new RelayError('request_timeout', `The request body did not arrive within ${Math.round(opts.timeoutMs! / 100) / 10} s`))
    }, opts.timeoutMs)
  })
  read.catch(() => {}) // a late failure after the deadline answered is nobody's business
  try {
    return await Promise.race([read, deadline])
  } finally {
    clearTimeout(timer)
  }
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

