/**
 * A message body as plaintext bytes and back. JSON content types (application/json, anything/+json)
 * carry the body's JSON text; any other type carries a string body as its UTF-8 text (what MRP agents
 * send with text/plain), and a non-string body as JSON text.
 */
import { DecryptError } from './errors.ts'
import { fromUtf8, utf8 } from './bytes.ts'

export function isJsonContentType(contentType: string): boolean {
  const base = contentType.split(';')[0]!.trim().toLowerCase()
  return base === 'application/json' || base.endsWith('+json')
}

export function encodeBody(contentType: string, body: unknown): Uint8Array {
  if (!isJsonContentType(contentType) && typeof body === 'string') return utf8.encode(body)
  return utf8.encode(JSON.stringify(body ?? null))
}

export function decodeBody(contentType: string, bytes: Uint8Array): unknown {
  let text: string
  try {
    text = fromUtf8(bytes)
  } catch {
    throw new DecryptError('malformed', 'the decrypted body is not UTF-8')
  }
  if (!isJsonContentType(contentType)) return text
  try {
    return JSON.parse(text)
  } catch {
    throw new DecryptError('malformed', `the decrypted body is not the JSON its content type (${contentType}) says`)
  }
}
