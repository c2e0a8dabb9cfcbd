/**
 * What the S3 blob store does beyond the BlobStore contract (test/contract/blob-store.test.ts):
 * configuration from `s3://bucket/prefix` and the AWS variables, the start-up check, how failures are
 * reported, server-side copies, paging, and staging left by other instances. Against a real s3rver
 * process; a recording proxy in front of it shows which requests the store makes.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { S3Client } from 'bun'
import { createServer, type AddressInfo } from 'node:net'

import { S3BlobStore, s3StoreFromUrl, type S3BlobStoreOptions } from '../../src/blobs/s3/s3-blob-store.ts'
import { parseS3Location } from '../../src/blobs/s3/s3-location.ts'
import { ConfigError } from '../../src/config/load.ts'
import { RelayError } from '../../src/errors.ts'
import { FakeClock } from '../../src/lib/clock.ts'
import { freePort } from '../support/binary.ts'
import { s3ServerRunner, startS3Server, type S3Server } from '../support/s3.ts'

const MiB = 1024 * 1024
const HOUR_MS = 60 * 60 * 1000
const CREDS = { AWS_ACCESS_KEY_ID: 'AKID', AWS_SECRET_ACCESS_KEY: 'secret' }
const sha256Hex = (b: Uint8Array | string) => new Bun.CryptoHasher('sha256').update(b).digest('hex')

describe('s3StoreFromUrl: s3://bucket/prefix and the AWS variables', () => {
  test('a custom endpoint is addressed path-style; the prefix ends in one slash', () => {
    const loc = parseS3Location('s3://relay-blobs/cluster/a/', { ...CREDS, AWS_ENDPOINT_URL_S3: 'http://127.0.0.1:9000/', AWS_REGION: 'eu-west-3' })
    expect(loc).toEqual({
      bucket: 'relay-blobs',
      prefix: 'cluster/a/',
      endpoint: 'http://127.0.0.1:9000',
      virtualHostedStyle: false,
      region: 'eu-west-3',
      accessKeyId: 'AKID',
      secretAccessKey: 'secret',
    })
    expect(parseS3Location('s3://relay-blobs', { ...CREDS, AWS_ENDPOINT_URL: 'https://minio.internal' }).prefix).toBe('')
    expect(parseS3Location('s3://relay-blobs//x//y', { ...CREDS, AWS_ENDPOINT_URL: 'https://minio.internal' }).prefix).toBe('x/y/')
  })

  test('AWS_ENDPOINT_URL_S3 wins over AWS_ENDPOINT_URL; the session token is passed on', () => {
    const loc = parseS3Location('s3://b-1', { ...CREDS, AWS_ENDPOINT_URL: 'http://general:1', AWS_ENDPOINT_URL_S3: 'http://s3only:2', AWS_SESSION_TOKEN: 'tok' })
    expect(loc.endpoint).toBe('http://s3only:2')
    expect(loc.sessionToken).toBe('tok')
  })

  test('without an endpoint: AWS itself, virtual-hosted (path-style for a bucket with dots), region defaulting to us-east-1', () => {
    expect(parseS3Location('s3://relay-blobs/p', { ...CREDS, AWS_REGION: 'eu-central-1' })).toMatchObject({
      endpoint: 'https://relay-blobs.s3.eu-central-1.amazonaws.com',
      virtualHostedStyle: true,
    })
    expect(parseS3Location('s3://relay.example.org', { ...CREDS, AWS_DEFAULT_REGION: 'us-west-2' })).toMatchObject({
      endpoint: 'https://s3.us-west-2.amazonaws.com',
      virtualHostedStyle: false,
      region: 'us-west-2',
    })
    expect(parseS3Location('s3://relay-blobs', CREDS).region).toBe('us-east-1')
  })

  test.each([
    ['not an s3 URL', 'http://bucket/x', {}, /expected s3:\/\/bucket\/prefix/],
    ['no bucket', 's3://', {}, /not a valid bucket name/],
    ['an upper-case bucket', 's3://Upper/x', {}, /not a valid bucket name/],
    ['a query', 's3://b/x?y=1', {}, /expected s3:\/\/bucket\/prefix/],
    ['a space in the prefix', 's3://bucket/a b', {}, /prefix "a b" may use only/],
    ['a .. segment', 's3://bucket/a/../b', {}, /no \. or \.\. segments/],
    ['an empty access key', 's3://bucket/x', { AWS_ACCESS_KEY_ID: '' }, /needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY/],
    ['no secret key', 's3://bucket/x', { AWS_SECRET_ACCESS_KEY: undefined }, /needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY/],
    ['an endpoint without a scheme', 's3://bucket/x', { AWS_ENDPOINT_URL_S3: 'minio:9000' }, /AWS_ENDPOINT_URL_S3 must be an http\(s\) URL/],
    ['an ftp endpoint', 's3://bucket/x', { AWS_ENDPOINT_URL: 'ftp://host' }, /AWS_ENDPOINT_URL must be an http\(s\) URL/],
    ['an endpoint with a path', 's3://bucket/x', { AWS_ENDPOINT_URL: 'http://host/s3' }, /without a path/],
    ['an endpoint with credentials', 's3://bucket/x', { AWS_ENDPOINT_URL: 'http://user:pw@host' }, /without a path, query or credentials/],
    ['a region with a space', 's3://bucket/x', { AWS_REGION: 'Mars 1' }, /not a region name/],
  ] as const)('%s: one line naming the problem', (_what, url, env, message) => {
    let err: unknown
    try {
      s3StoreFromUrl(url, { ...CREDS, ...env }, new FakeClock())
    } catch (e) {
      err = e
    }
    expect(err).toBeInstanceOf(ConfigError)
    expect((err as Error).message).toMatch(/^RELAY_BLOB_STORE: /)
    expect((err as Error).message).toMatch(message)
    expect((err as Error).message).not.toContain('\n')
    expect((err as Error).message).not.toContain('secret')
  })
})

describe('S3 store: an unreachable store', () => {
  let endpoint = ''
  let store: S3BlobStore
  beforeAll(async () => {
    // a port nothing listens on
    endpoint = `http://127.0.0.1:${await freePort()}`
    store = s3StoreFromUrl('s3://relay-test/p/', { ...CREDS, AWS_ENDPOINT_URL_S3: endpoint }, new FakeClock())
  })

  test('the start-up check fails with one line naming the bucket and the endpoint', async () => {
    const err = await store.check().catch((e) => e)
    expect(err).toBeInstanceOf(Error)
    expect(err.message).toBe(`blob store s3://relay-test/p/ at ${endpoint} cannot be used: unreachable (ConnectionRefused)`)
    expect(await store.problem()).toBe(`s3://relay-test/p/ at ${endpoint}: unreachable (ConnectionRefused)`)
    // readiness does not wait on a shared bucket: messaging works without it
    expect(await store.ready()).toBeNull()
  })

  test('a store that takes connections and never answers: the start-up check and the health probe say so in time', async () => {
    const silent = createServer(() => {})
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', () => resolve()))
    try {
      const at = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`
      const mute = s3StoreFromUrl('s3://relay-test/', { ...CREDS, AWS_ENDPOINT_URL_S3: at }, new FakeClock(), { probeTimeoutMs: 300 })
      const err = await mute.check().catch((e) => e)
      expect(err.message).toBe(`blob store s3://relay-test/ at ${at} cannot be used: unreachable (no answer within 300 ms)`)
      expect(await mute.problem()).toBe(`s3://relay-test/ at ${at}: unreachable (no answer within 300 ms)`)
    } finally {
      silent.close()
    }
  })

  test('every operation answers 503 service_unavailable with Retry-After', async () => {
    const small = await store.receive(new Response('hello').body, { maxBytes: 100 }).catch((e) => e)
    const large = await store.receive(new Response(new Uint8Array(9 * MiB)).body, { maxBytes: 10 * MiB }).catch((e) => e)
    const staged = { hashHex: sha256Hex('hello'), hashBase64Url: '', size: 5, staging: 'p/staging/1-x' }
    const errors = [
      small,
      large,
      await store.place(staged).catch((e) => e),
      await store.discard(staged).catch((e) => e),
      await store.size(sha256Hex('x')).catch((e) => e),
      await store.delete(sha256Hex('x')).catch((e) => e),
      await (async () => {
        for await (const _ of store.list('ab'));
      })().catch((e) => e),
      await store.removeStaleStaging().catch((e) => e),
    ]
    for (const err of errors) {
      expect(err).toBeInstanceOf(RelayError)
      expect(err.code).toBe('service_unavailable')
      expect(err.status).toBe(503)
      expect(err.headers['Retry-After']).toMatch(/^\d+$/)
    }
    expect(store.unverifiedBytes).toBe(0)
  })
})

const node = s3ServerRunner('S3 blob store against s3rver')

describe.skipIf(node === null)('S3 store against s3rver', () => {
  let server: S3Server
  let raw: S3Client
  /** Requests that passed the recording proxy: method, path and query, copy source. */
  let seen: { method: string; target: string; copySource: string | null }[] = []
  let proxy: ReturnType<typeof Bun.serve>
  let prefixes = 0

  beforeAll(async () => {
    server = await startS3Server(node as string)
    raw = new S3Client({ endpoint: server.endpoint, bucket: server.bucket, accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER', region: 'us-east-1' })
    proxy = Bun.serve({
      port: 0,
      hostname: '127.0.0.1',
      async fetch(req) {
        const url = new URL(req.url)
        seen.push({ method: req.method, target: url.pathname + url.search, copySource: req.headers.get('x-amz-copy-source') })
        const headers = new Headers(req.headers)
        const res = await fetch(server.endpoint + url.pathname + url.search, {
          method: req.method,
          headers,
          body: req.method === 'GET' || req.method === 'HEAD' ? undefined : await req.arrayBuffer(),
        })
        return new Response(req.method === 'HEAD' ? null : await res.arrayBuffer(), { status: res.status, headers: res.headers })
      },
    })
  })
  afterAll(async () => {
    proxy?.stop(true)
    await server?.stop()
  })

  /** A store on a prefix of its own, talking through the recording proxy. */
  function storeOf(opts: S3BlobStoreOptions = {}, clock = new FakeClock()) {
    const prefix = `s3-${++prefixes}/`
    const env = { ...server.env, AWS_ENDPOINT_URL_S3: `http://127.0.0.1:${proxy.port}` }
    seen = []
    return { store: s3StoreFromUrl(server.url(prefix), env, clock, opts), prefix, clock }
  }

  test('the start-up check passes and leaves nothing behind', async () => {
    const { store, prefix } = storeOf()
    await store.check()
    expect((await raw.list({ prefix })).contents ?? []).toEqual([])
  })

  test('a bucket that does not exist: the start-up check names it; other failures are errors naming the store, not 503', async () => {
    const store = s3StoreFromUrl('s3://no-such-bucket/x/', server.env, new FakeClock())
    const err = await store.check().catch((e) => e)
    expect(err.message).toBe(`blob store s3://no-such-bucket/x/ at ${server.endpoint} cannot be used: NoSuchBucket: The specified bucket does not exist`)
    const listing = await (async () => {
      for await (const _ of store.list('00'));
    })().catch((e) => e)
    expect(listing).not.toBeInstanceOf(RelayError)
    expect(listing.message).toContain('s3://no-such-bucket/x/')
    expect(listing.message).toContain('NoSuchBucket')
  })

  test('place copies inside the store (CopyObject), never through the relay; the staging is deleted', async () => {
    const { store, prefix } = storeOf()
    const bytes = crypto.getRandomValues(new Uint8Array(300_000))
    const staged = await store.receive(new Response(bytes).body, { maxBytes: MiB })
    seen = []
    await store.place(staged)
    const target = `/${server.bucket}/${prefix}${staged.hashHex.slice(0, 2)}/${staged.hashHex.slice(2, 4)}/${staged.hashHex}`
    expect(seen.filter((r) => r.copySource !== null)).toEqual([{ method: 'PUT', target, copySource: `/${server.bucket}/${staged.staging}` }])
    expect(seen.filter((r) => r.method === 'GET')).toEqual([])
    expect(seen.at(-1)).toMatchObject({ method: 'DELETE', target: `/${server.bucket}/${staged.staging}` })
    expect(new Uint8Array(await raw.file(store.keyOf(staged.hashHex)).arrayBuffer())).toEqual(bytes)
    expect(await raw.exists(staged.staging as string)).toBe(false)

    // the same content again: already there with the right size, so no copy at all
    const again = await store.receive(new Response(bytes).body, { maxBytes: MiB })
    seen = []
    await store.place(again)
    expect(seen.map((r) => r.method)).toEqual(['HEAD', 'DELETE'])
  })

  test('content larger than one CopyObject may copy is copied by streaming, whole', async () => {
    const { store } = storeOf({ copyLimitBytes: 0, partSizeBytes: 5 * MiB })
    const bytes = crypto.getRandomValues(new Uint8Array(65536)).slice()
    const big = new Uint8Array(11 * MiB)
    for (let i = 0; i < big.length; i += bytes.length) big.set(bytes.subarray(0, Math.min(bytes.length, big.length - i)), i)
    big[0] = 42
    const staged = await store.receive(new Response(big).body, { maxBytes: 20 * MiB })
    seen = []
    await store.place(staged)
    expect(seen.some((r) => r.copySource !== null)).toBe(false)
    expect(seen.some((r) => r.method === 'GET' && r.target.includes('/staging/'))).toBe(true)
    expect(await store.size(staged.hashHex)).toBe(big.length)
    expect(sha256Hex(new Uint8Array(await raw.file(store.keyOf(staged.hashHex)).arrayBuffer()))).toBe(staged.hashHex)
    expect(await raw.exists(staged.staging as string)).toBe(false)
  })

  test('a small upload is one PUT; one dropped before a part was gathered costs no request', async () => {
    const { store } = storeOf()
    await store.receive(new Response('x'.repeat(1000)).body, { maxBytes: MiB })
    expect(seen.map((r) => r.method)).toEqual(['PUT'])
    seen = []
    const dropped = await store.receive(new Response('y'.repeat(1000)).body, { maxBytes: MiB, keep: () => false })
    expect(dropped.staging).toBeNull()
    expect(seen).toEqual([])
  })

  test('list and stale-staging cleanup page through ListObjectsV2', async () => {
    const { store, prefix, clock } = storeOf({ listPageSize: 2 })
    const hashes = Array.from({ length: 5 }, (_, i) => `abcd${String(i).repeat(60)}`)
    for (const h of hashes) await raw.write(`${prefix}ab/cd/${h}`, 'x')
    await raw.write(`${prefix}ac/cd/ac${'0'.repeat(62)}`, 'x')
    seen = []
    const listed: string[] = []
    for await (const h of store.list('ab')) listed.push(h)
    expect(listed).toEqual(hashes)
    expect(seen.filter((r) => r.method === 'GET').length).toBe(3)

    const old = clock.now() - 2 * HOUR_MS
    for (let i = 0; i < 5; i++) await raw.write(`${prefix}staging/${old}-${i}`, 'x')
    await raw.write(`${prefix}staging/${clock.now() - 10 * 60 * 1000}-recent`, 'x')
    expect(await store.removeStaleStaging()).toBe(5)
    expect(((await raw.list({ prefix: `${prefix}staging/` })).contents ?? []).map((o) => o.key)).toEqual([`${prefix}staging/${clock.now() - 10 * 60 * 1000}-recent`])
  })

  test('staging named without a time is judged by its last modification', async () => {
    const { store, prefix, clock } = storeOf()
    await raw.write(`${prefix}staging/odd-name`, 'x')
    expect(await store.removeStaleStaging()).toBe(0)
    clock.set(Date.now() + 2 * HOUR_MS)
    expect(await store.removeStaleStaging()).toBe(1)
  })
})

describe('S3 store: answers of a store that fails a copy', () => {
  test('CopyObject answered 200 with an error inside, or 5xx: 503; access denied: an error naming the store', async () => {
    const answers: Response[] = []
    const fake = Bun.serve({
      port: 0,
      hostname: '127.0.0.1',
      async fetch(req) {
        if (req.method === 'HEAD') return new Response(null, { status: 404 })
        if (req.method === 'DELETE') return new Response(null, { status: 204 })
        return answers.shift() ?? new Response('unexpected', { status: 500 })
      },
    })
    try {
      const store = s3StoreFromUrl('s3://relay-test/', { ...CREDS, AWS_ENDPOINT_URL_S3: `http://127.0.0.1:${fake.port}` }, new FakeClock())
      const staged = { hashHex: sha256Hex('z'), hashBase64Url: '', size: 1, staging: 'staging/1-abc' }
      answers.push(new Response('<?xml version="1.0"?><Error><Code>InternalError</Code><Message>We encountered an internal error.</Message></Error>', { status: 200 }))
      answers.push(new Response('<html>Bad gateway</html>', { status: 502 }))
      answers.push(new Response('<?xml version="1.0"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>', { status: 403 }))
      for (const expected of ['service_unavailable', 'service_unavailable']) {
        const err = await store.place(staged).catch((e) => e)
        expect(err).toBeInstanceOf(RelayError)
        expect(err.code).toBe(expected)
      }
      const denied = await store.place(staged).catch((e) => e)
      expect(denied).not.toBeInstanceOf(RelayError)
      expect(denied.message).toBe(`blob store s3://relay-test/ at http://127.0.0.1:${fake.port}: AccessDenied: Access Denied`)
    } finally {
      fake.stop(true)
    }
  })
})
