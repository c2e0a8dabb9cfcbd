/**
 * AWS Signature Version 4 for the one request Bun's S3 client does not make: a server-side copy
 * (PUT with `x-amz-copy-source`). Header-signed, payload hash of the empty body; the same algorithm
 * Bun's client uses for everything else (test/blobs/s3-sigv4.test.ts checks both against each other
 * and against AWS's published example).
 */
import { createHash, createHmac } from 'node:crypto'

export interface SigV4Credentials {
  accessKeyId: string
  secretAccessKey: string
  sessionToken?: string
  region: string
}

export interface SigV4Request {
  method: string
  /** Absolute URL; its path must already be encoded as S3 expects (each segment once, RFC 3986). */
  url: string
  /** Headers to send and sign (names in any case); `host`, `x-amz-date` and the token are added. */
  headers: Record<string, string>
  /** Hex SHA-256 of the body, or UNSIGNED-PAYLOAD; defaults to the hash of an empty body. */
  payloadHash?: string
}

const EMPTY_PAYLOAD_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'

/** The request's headers with `authorization` added: what to send. `nowMs` is the signing time. */
export function signSigV4(req: SigV4Request, creds: SigV4Credentials, nowMs: number, service = 's3'): Record<string, string> {
  const url = new URL(req.url)
  const amzDate = new Date(nowMs).toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '')
  const day = amzDate.slice(0, 8)
  const payloadHash = req.payloadHash ?? EMPTY_PAYLOAD_SHA256
  const headers: Record<string, string> = {}
  for (const [name, value] of Object.entries(req.headers)) headers[name.toLowerCase()] = value
  headers.host = url.host
  headers['x-amz-date'] = amzDate
  headers['x-amz-content-sha256'] = payloadHash
  if (creds.sessionToken) headers['x-amz-security-token'] = creds.sessionToken

  const names = Object.keys(headers).sort()
  const canonicalHeaders = names.map((n) => `${n}:${headers[n].trim().replace(/\s+/g, ' ')}\n`).join('')
  const signedHeaders = names.join(';')
  const canonicalRequest = [req.method.toUpperCase(), url.pathname || '/', canonicalQuery(url), canonicalHeaders, signedHeaders, payloadHash].join('\n')
  const scope = `${day}/${creds.region}/${service}/aws4_request`
  const stringToSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256Hex(canonicalRequest)].join('\n')
  let key: Buffer = hmac(`AWS4${creds.secretAccessKey}`, day)
  for (const part of [creds.region, service, 'aws4_request']) key = hmac(key, part)
  const signature = createHmac('sha256', key).update(stringToSign).digest('hex')
  headers.authorization = `AWS4-HMAC-SHA256 Credential=${creds.accessKeyId}/${scope}, SignedHeaders=${signedHeaders}, Signature=${signature}`
  return headers
}

/** Encodes one path segment or query part the way S3 signs it: everything but A-Z a-z 0-9 - _ . ~ */
export function encodeRfc3986(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)
}

function canonicalQuery(url: URL): string {
  const pairs = [...url.searchParams].map(([k, v]) => [encodeRfc3986(k), encodeRfc3986(v)])
  pairs.sort(([a, x], [b, y]) => (a < b ? -1 : a > b ? 1 : x < y ? -1 : x > y ? 1 : 0))
  return pairs.map(([k, v]) => `${k}=${v}`).join('&')
}

const sha256Hex = (s: string) => createHash('sha256').update(s).digest('hex')
const hmac = (key: string | Buffer, data: string) => createHmac('sha256', key).update(data).digest()
