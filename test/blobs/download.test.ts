/** GET and HEAD /v1/blobs/{blobID} (docs/protocol.md §6): headers, ranges, who may read, and ids that are refused. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { rmSync } from 'node:fs'
import type { BlobJson, RelayClient } from '../../src/client/index.ts'
import { BASE_URL, expectError, startTestRelay, type TestRelay } from '../support/harness.ts'
import { signed } from '../support/signed.ts'
import { enc, json, keysOf, randomContent, sha256Hex, uploadText } from './helpers.ts'

let t: TestRelay
let owner: RelayClient
let blob: BlobJson
const TEXT = '0123456789abcdefghij' // 20 bytes
beforeAll(async () => {
  t = await startTestRelay({ rateLimits: { sendPerMin: 0, pollPerMin: 0 } })
  owner = t.client()
  blob = await uploadText(owner, TEXT, 'text/x-digits')
})
afterAll(() => t.close())

const get = (c: RelayClient, id: string, headers: Record<string, string> = {}) => c.transport.send('GET', `/v1/blobs/${id}`, undefined, headers)
const head = (c: RelayClient, id: string, headers: Record<string, string> = {}) => c.transport.send('HEAD', `/v1/blobs/${id}`, undefined, headers)

describe('GET and HEAD', () => {
  test('GET: the bytes with Content-Type, Content-Length, ETag and X-M2M-Blob-Hash', async () => {
    const res = await get(owner, blob.blob_id)
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toBe('text/x-digits')
    expect(res.headers.get('content-length')).toBe('20')
    expect(res.headers.get('etag')).toBe(`"${sha256Hex(TEXT)}"`)
    expect(res.headers.get('x-m2m-blob-hash')).toBe(sha256Hex(TEXT))
    expect(res.headers.get('accept-ranges')).toBe('bytes')
    expect(res.headers.get('x-request-id')).toMatch(/^req_/)
    expect(await res.text()).toBe(TEXT)
  })

  test('every download carries nosniff and a sandboxing CSP; active types are attachments', async () => {
    const cases: [string, boolean][] = [
      ['text/plain', false],
      ['image/png', false],
      ['application/json; charset=utf-8', false],
      ['application/octet-stream', false],
      ['text/html', true],
      ['TEXT/HTML; charset=utf-8', true],
      ['image/svg+xml', true],
      ['application/xhtml+xml', true],
      ['application/atom+xml', true],
      ['text/xml', true],
      ['application/javascript', true],
      ['text/javascript', true],
      ['multipart/x-mixed-replace; boundary=x', true],
      ['text/html, text/plain', true], // not one type: a browser might pick the first
      ['garbage', true],
    ]
    for (const [type, attachment] of cases) {
      const b = await uploadText(owner, `<b>${type}</b>`, type)
      for (const res of [await get(owner, b.blob_id), await head(owner, b.blob_id), await get(owner, b.blob_id, { range: 'bytes=0-1' })]) {
        expect([type, res.headers.get('x-content-type-options')]).toEqual([type, 'nosniff'])
        expect([type, res.headers.get('content-security-policy')]).toEqual([type, "default-src 'none'; sandbox"])
        expect([type, res.headers.get('content-disposition')]).toEqual([type, attachment ? 'attachment' : null])
      }
    }
  })

  test('HEAD: the same headers, no body; the signature covers the method HEAD', async () => {
    const res = await head(owner, blob.blob_id)
    expect(res.status).toBe(200)
    const g = await get(owner, blob.blob_id)
    for (const h of ['content-type', 'content-length', 'etag', 'x-m2m-blob-hash', 'accept-ranges']) expect([h, res.headers.get(h)]).toEqual([h, g.headers.get(h)])
    expect(await res.text()).toBe('')
    // signed as GET, sent as HEAD
    const req = signed(keysOf(owner), 'GET', `/v1/blobs/${blob.blob_id}`, { nowMs: t.clock.now() })
    const bad = await t.handle(new Request(req.url, { method: 'HEAD', headers: req.headers }))
    expect(bad.status).toBe(401)
    expect(await bad.text()).toBe('')
    // and the other way round: signed as HEAD, sent as GET
    const asHead = signed(keysOf(owner), 'HEAD', `/v1/blobs/${blob.blob_id}`, { nowMs: t.clock.now() })
    await expectError(await t.handle(new Request(asHead.url, { method: 'GET', headers: asHead.headers })), 401, 'invalid_signature')
  })

  test('HEAD of a large blob answers its size without reading it', async () => {
    const big = await owner.uploadBlob(randomContent(3 * 1024 * 1024 + 5))
    const res = await head(owner, big.blob_id)
    expect(res.headers.get('content-length')).toBe(String(3 * 1024 * 1024 + 5))
    expect(await owner.blobInfo(big.blob_id)).toEqual({ blob_id: big.blob_id, size: big.size, content_type: 'application/octet-stream', hash: big.hash })
    const part = await head(owner, big.blob_id, { range: 'bytes=-10' })
    expect(part.status).toBe(206)
    expect(part.headers.get('content-length')).toBe('10')
  })

  test('a large blob downloads whole and intact', async () => {
    const bytes = randomContent(2 * 1024 * 1024 + 3)
    const b = await owner.uploadBlob(bytes)
    const res = await owner.downloadBlob(b.blob_id)
    expect(sha256Hex(new Uint8Array(await res.arrayBuffer()))).toBe(sha256Hex(bytes))
  })

  test('query parameters are refused with 400', async () => {
    const e = await expectError(await owner.transport.send('GET', `/v1/blobs/${blob.blob_id}?download=1`), 400, 'bad_request')
    expect(e.details.fields).toEqual({ download: 'unknown parameter' })
  })
})

describe('Range', () => {
  const cases: [string, number, string, string][] = [
    ['bytes=0-0', 206, 'bytes 0-0/20', '0'],
    ['bytes=19-19', 206, 'bytes 19-19/20', 'j'],
    ['bytes=5-9', 206, 'bytes 5-9/20', '56789'],
    ['bytes=15-', 206, 'bytes 15-19/20', 'fghij'],
    ['bytes=-3', 206, 'bytes 17-19/20', 'hij'],
    ['bytes=-100', 206, 'bytes 0-19/20', TEXT],
    ['bytes=10-1000', 206, 'bytes 10-19/20', 'abcdefghij'],
    ['bytes=0-', 206, 'bytes 0-19/20', TEXT],
  ]
  for (const [range, status, contentRange, body] of cases) {
    test(`${range} → ${status} ${contentRange}`, async () => {
      const res = await get(owner, blob.blob_id, { range })
      expect(res.status).toBe(status)
      expect(res.headers.get('content-range')).toBe(contentRange)
      expect(res.headers.get('content-length')).toBe(String(body.length))
      expect(res.headers.get('etag')).toBe(`"${blob.hash}"`)
      expect(await res.text()).toBe(body)
    })
  }

  for (const range of ['bytes=20-', 'bytes=20-25', 'bytes=1000-2000', 'bytes=-0']) {
    test(`${range} → 416 with Content-Range: bytes */20`, async () => {
      const res = await get(owner, blob.blob_id, { range })
      await expectError(res, 416, 'range_not_satisfiable')
      expect(res.headers.get('content-range')).toBe('bytes */20')
    })
  }

  for (const range of ['bytes=5-2', 'bytes=0-1,5-6', 'items=0-5', 'bytes=abc', 'bytes=-', 'bytes 0-5', 'bytes=99999999999999999999-']) {
    test(`ignored: ${JSON.stringify(range)} → 200 with the whole blob`, async () => {
      const res = await get(owner, blob.blob_id, { range })
      expect(res.status).toBe(200)
      expect(res.headers.get('content-range')).toBeNull()
      expect(await res.text()).toBe(TEXT)
    })
  }

  test('over a real socket too: an ignored Range gets the whole blob, never a bare answer of the server', async () => {
    const { url } = await t.relay.start()
    const wire = new (owner.constructor as typeof RelayClient)({ baseUrl: url, keys: keysOf(owner), now: () => t.clock.now() })
    for (const range of ['bytes=99999999999999999999-', 'bytes=999999999999999999-', 'bytes=-999999999999999999', 'bytes=0-1,5-6', 'bytes= 0-1', 'bytes=5-2']) {
      const res = await get(wire, blob.blob_id, { range })
      expect([range, res.status, res.headers.get('content-range'), await res.text()]).toEqual([range, 200, null, TEXT])
      expect(res.headers.get('x-request-id')).toMatch(/^req_/)
    }
    const part = await get(wire, blob.blob_id, { range: 'bytes=2-4' })
    expect([part.status, await part.text()]).toEqual([206, '234'])
  })

  test('an empty blob has no satisfiable range', async () => {
    const empty = await owner.uploadBlob(new Uint8Array(0))
    expect((await get(owner, empty.blob_id)).status).toBe(200)
    expect((await get(owner, empty.blob_id, { range: 'bytes=0-0' })).status).toBe(416)
    expect((await head(owner, empty.blob_id)).headers.get('content-length')).toBe('0')
  })

  test('the client asks for ranges', async () => {
    expect(await (await owner.downloadBlob(blob.blob_id, { range: { start: 2, end: 4 } })).text()).toBe('234')
    expect(await (await owner.downloadBlob(blob.blob_id, { range: { start: 18 } })).text()).toBe('ij')
    expect(await (await owner.downloadBlob(blob.blob_id, { range: { suffix: 1 } })).text()).toBe('j')
  })
})

describe('who may read (docs/protocol.md §6)', () => {
  test('owner, sender and recipient of an unexpired message that attaches it; a stranger gets 404; after the message expires only the owner', async () => {
    const sender = t.client()
    const recipient = t.client()
    const stranger = t.client()
    const b = await uploadText(sender, 'shared with one message')
    const m = await sender.send({ recipient_key: recipient.publicKey, attachments: [{ blob_id: b.blob_id }], expires_in: 60 })
    expect(m.status).toBe('sent')
    for (const reader of [sender, recipient]) {
      expect((await get(reader, b.blob_id)).status).toBe(200)
      expect((await head(reader, b.blob_id)).status).toBe(200)
    }
    await expectError(await get(stranger, b.blob_id), 404, 'blob_not_found')
    expect((await head(stranger, b.blob_id)).status).toBe(404)
    // delivery does not end access; expiry does
    await recipient.poll()
    expect((await get(recipient, b.blob_id)).status).toBe(200)
    t.clock.advance(60_000)
    await expectError(await get(recipient, b.blob_id), 404, 'blob_not_found')
    expect((await get(sender, b.blob_id)).status).toBe(200) // the owner, until the blob itself expires
    t.clock.advance(24 * 3600_000)
    await expectError(await get(sender, b.blob_id), 404, 'blob_not_found')
  })

  test("a blob someone else attached to a message between others is not readable through yours", async () => {
    const a = t.client()
    const b = t.client()
    const c = t.client()
    const x = await uploadText(a, 'from a to b only')
    await a.send({ recipient_key: b.publicKey, attachments: [{ blob_id: x.blob_id }] })
    await c.send({ recipient_key: a.publicKey, body: { text: 'hi' } })
    await expectError(await get(c, x.blob_id), 404, 'blob_not_found')
  })

  test('a record whose file is gone answers 404, not 500', async () => {
    const b = await owner.uploadBlob(enc('soon lost ' + Math.random()))
    rmSync(`${t.relay.paths.blobs}/${b.hash.slice(0, 2)}/${b.hash.slice(2, 4)}/${b.hash}`)
    await expectError(await get(owner, b.blob_id), 404, 'blob_not_found')
  })
})

describe('crafted ids are refused before the file system is touched', () => {
  const crafted = [
    '..',
    '..%2F..%2Frelay.db',
    '%2E%2E',
    'blob_..%2F..%2F..%2Fetc%2Fpasswd',
    `blob_${'a'.repeat(23)}`,
    `blob_${'a'.repeat(25)}`,
    `blob_${'A'.repeat(24)}`,
    `blob_${'0'.repeat(22)}%2F`,
    `BLOB_${'0'.repeat(24)}`,
    'x'.repeat(5000),
    `blob_${'0'.repeat(24)}%00`,
    `blob_${'0'.repeat(24)}.`,
  ]
  for (const id of crafted) {
    test(`${id.length > 60 ? id.slice(0, 20) + '… (' + id.length + ' chars)' : id} → 404 blob_not_found or not_found`, async () => {
      for (const method of ['GET', 'HEAD', 'DELETE']) {
        const res = await owner.transport.send(method, `/v1/blobs/${id}`)
        expect([method, res.status]).toEqual([method, 404])
        if (method !== 'HEAD') expect(['blob_not_found', 'not_found']).toContain((await json(res)).error.code)
      }
    })
  }

  test('the service checks the id pattern before building anything', async () => {
    const svc = t.relay.features.blobs.blobs
    for (const id of ['../../relay.db', 'blob_' + '0'.repeat(24) + '/..', '']) {
      await expect(svc.open(owner.publicKey, id)).rejects.toMatchObject({ code: 'blob_not_found' })
      expect(() => svc.delete(owner.publicKey, id)).toThrow()
    }
  })

  test('unsigned requests: 401 before anything else', async () => {
    for (const method of ['GET', 'HEAD', 'DELETE', 'POST']) {
      const path = method === 'POST' ? '/v1/blobs' : `/v1/blobs/${blob.blob_id}`
      const res = await t.handle(new Request(BASE_URL + path, { method }))
      expect([method, res.status]).toEqual([method, 401])
    }
  })

  test('wrong methods → 404 not_found', async () => {
    for (const [method, path] of [
      ['PUT', `/v1/blobs/${blob.blob_id}`],
      ['PATCH', `/v1/blobs/${blob.blob_id}`],
      ['POST', `/v1/blobs/${blob.blob_id}`],
      ['GET', '/v1/blobs'],
      ['DELETE', '/v1/blobs'],
    ]) {
      await expectError(await owner.transport.send(method, path), 404, 'not_found')
    }
  })
})
