/**
 * The Signature V4 code the S3 store signs its copies with. s3rver does not check signatures, so this
 * is where they are checked: against AWS's published example, and against the signatures Bun's own S3
 * client puts on the requests it sends (captured by a local server), for keys and queries that need
 * escaping.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { S3Client } from 'bun'
import { signSigV4 } from '../../src/blobs/s3/sigv4.ts'

test("AWS's example: GET Object with a Range header (Signature Version 4 documentation)", () => {
  const headers = signSigV4(
    { method: 'GET', url: 'https://examplebucket.s3.amazonaws.com/test.txt', headers: { Range: 'bytes=0-9' } },
    { accessKeyId: 'AKIAIOSFODNN7EXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY', region: 'us-east-1' },
    Date.parse('2013-05-24T00:00:00Z'),
  )
  expect(headers.authorization).toBe(
    'AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41',
  )
  expect(headers['x-amz-date']).toBe('20130524T000000Z')
})

interface Captured {
  method: string
  url: string
  headers: Record<string, string>
}
const captured: Captured[] = []
let server: ReturnType<typeof Bun.serve>
beforeAll(() => {
  server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    fetch(req) {
      captured.push({ method: req.method, url: req.url, headers: Object.fromEntries(req.headers) })
      return new Response('<?xml version="1.0"?><ListBucketResult><Name>b</Name><IsTruncated>false</IsTruncated></ListBucketResult>', { status: 200 })
    },
  })
})
afterAll(() => server?.stop(true))

test.each([
  ['a HEAD of a key with characters to escape', (c: S3Client) => c.file('dir/a b+c=d(1)*~é.bin').exists()],
  ['a list with a prefix and a continuation token', (c: S3Client) => c.list({ prefix: 'p/ab/', maxKeys: 7, continuationToken: 'x/y+z==' })],
  ['a DELETE with a session token', (c: S3Client) => c.delete('staging/1-abc')],
])('the same signature as Bun for %s', async (_what, call) => {
  captured.length = 0
  const creds = { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY', region: 'eu-west-3', sessionToken: 'token/with+chars=' }
  const client = new S3Client({ ...creds, endpoint: `http://127.0.0.1:${server.port}`, bucket: 'relay-test' })
  await call(client).catch(() => {})
  expect(captured).toHaveLength(1)
  const req = captured[0]
  const auth = /^AWS4-HMAC-SHA256 Credential=[^,]+, SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$/.exec(req.headers.authorization)
  expect(auth).not.toBeNull()
  const signedNames = (auth as RegExpExecArray)[1].split(';')
  const amzDate = req.headers['x-amz-date']
  const nowMs = Date.parse(`${amzDate.slice(0, 4)}-${amzDate.slice(4, 6)}-${amzDate.slice(6, 8)}T${amzDate.slice(9, 11)}:${amzDate.slice(11, 13)}:${amzDate.slice(13, 15)}Z`)
  // the headers Bun signed, except those the signer sets itself
  const own = new Set(['host', 'x-amz-date', 'x-amz-content-sha256', 'x-amz-security-token'])
  const headers = Object.fromEntries(signedNames.filter((n) => !own.has(n)).map((n) => [n, req.headers[n]]))
  const ours = signSigV4({ method: req.method, url: req.url, headers, payloadHash: req.headers['x-amz-content-sha256'] }, creds, nowMs)
  expect(ours.authorization).toBe(req.headers.authorization)
})
