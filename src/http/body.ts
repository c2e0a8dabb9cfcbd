import { RelayError } from '../errors.ts'

const tooLarge = (limit: number) =>
  new RelayError('payload_too_large', `Request body exceeds ${limit} bytes`, { limit_bytes: limit })

/**
 * Reads the whole body up to `limit` bytes: refuses at once when Content-Length says it is larger,
 * and stops reading a chunked body as soon as it passes the limit (SPEC §4.3 check 1).
 */
export async function readRawBody(request: Request, limit: number): Promise<Uint8Array> {
  const declared = request.headers.get('content-length')
  if (declared !== null && Number(declared) > limit) throw tooLarge(limit)
  if (!request.body) return new Uint8Array(0)
  if (declared !== null) {
    const buf = new Uint8Array(await request.arrayBuffer())
    if (buf.length > limit) throw tooLarge(limit)
    return buf
  }
  const chunks: Uint8Array[] = []
  let total = 0
  for await (const chunk of request.body as unknown as AsyncIterable<Uint8Array>) {
    total += chunk.length
    if (total > limit) throw tooLarge(limit)
    chunks.push(chunk)
  }
  return Buffer.concat(chunks)
}
