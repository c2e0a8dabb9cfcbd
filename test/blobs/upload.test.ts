/** POST /v1/blobs (docs/protocol.md §6): results, content addressing, size limit, quota, and what a failure leaves. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { expectError, startTestRelay, type TestRelay } from '../support/harness.ts'
import { BLOB_ID, blobFiles, blobRecords, chunked, enc, json, randomContent, rawUpload, sha256Hex, tempFiles } from './helpers.ts'

const MAX = 64 * 1024
const QUOTA = 200 * 1024
let t: TestRelay
beforeAll(async () => {
  t = await startTestRelay({ blobs: { maxSizeBytes: MAX, quotaBytes: QUOTA } })
})
afterAll(() => t.close())

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

describe('a new blob', () => {
  test('201 with exactly the fields of docs/protocol.md §6, storage headers, a random id, 24 h lifetime', async () => {
    const a = t.client()
    const bytes = enc('hello blob')
    const res = await rawUpload(t, a, bytes, { contentType: 'text/plain; charset=utf-8' })
    expect(res.status).toBe(201)
    const blob = await json(res)
    expect(Object.keys(blob)).toEqual(['blob_id', 'hash', 'size', 'content_type', 'created_at', 'expires_at'])
    expect(blob.blob_id).toMatch(BLOB_ID)
    expect(blob.blob_id).not.toContain(sha256Hex(bytes).slice(0, 24))
    expect(blob.hash).toBe(sha256Hex(bytes))
    expect(blob.size).toBe(bytes.length)
    expect(blob.content_type).toBe('text/plain; charset=utf-8')
    expect(blob.created_at).toMatch(ISO_MS)
    expect(Date.parse(blob.expires_at) - Date.parse(blob.created_at)).toBe(24 * 3600_000)
    expect(res.headers.get('x-m2m-storage-used')).toBe(String(bytes.length))
    expect(res.headers.get('x-m2m-storage-limit')).toBe(String(QUOTA))
    expect(res.headers.get('x-request-id')).toMatch(/^req_/)
  })

  test('content type defaults to application/octet-stream', async () => {
    const blob = await json(await rawUpload(t, t.client(), enc('no type'), { contentType: null }))
    expect(blob.content_type).toBe('application/octet-stream')
  })

  test('an empty blob is a blob', async () => {
    const res = await rawUpload(t, t.client(), new Uint8Array(0))
    expect(res.status).toBe(201)
    const blob = await json(res)
    expect(blob.size).toBe(0)
    expect(blob.hash).toBe(sha256Hex(''))
  })

  test('a body that arrives in pieces without Content-Length is stored whole', async () => {
    const bytes = randomContent(50_000)
    const res = await rawUpload(t, t.client(), bytes, { body: chunked(bytes, 777) })
    expect(res.status).toBe(201)
    const blob = await json(res)
    expect(blob.size).toBe(50_000)
    expect(blob.hash).toBe(sha256Hex(bytes))
    expect(blobFiles(t)).toContain(`${blob.hash.slice(0, 2)}/${blob.hash.slice(2, 4)}/${blob.hash}`)
  })

  test('the client uploads bytes, files, Blobs and one-shot streams alike', async () => {
    const a = t.client()
    const bytes = randomContent(10_000)
    const path = `${t.dataDir}/upload-source.bin`
    await Bun.write(path, bytes)
    const fromBytes = await a.uploadBlob(bytes)
    expect(fromBytes.hash).toBe(sha256Hex(bytes))
    expect((await a.uploadBlob(path)).blob_id).toBe(fromBytes.blob_id)
    expect((await a.uploadBlob(Bun.file(path))).blob_id).toBe(fromBytes.blob_id)
    expect((await a.uploadBlob(chunked(bytes, 999))).blob_id).toBe(fromBytes.blob_id)
    let seen = 0
    await a.uploadBlob(randomContent(5000), { onProgress: (n) => (seen = n) })
    expect(seen).toBe(5000)
  })
})

describe('content addressing', () => {
  test('the same owner uploading identical bytes: 200 with the same record, its lifetime renewed', async () => {
    const a = t.client()
    const bytes = randomContent(3000)
    const first = await json(await rawUpload(t, a, bytes))
    t.clock.advance(3600_000)
    const res = await rawUpload(t, a, bytes, { contentType: 'application/x-other' })
    expect(res.status).toBe(200)
    const again = await json(res)
    expect(again.blob_id).toBe(first.blob_id)
    expect(again.content_type).toBe(first.content_type)
    expect(again.created_at).toBe(first.created_at)
    expect(Date.parse(again.expires_at)).toBe(t.clock.now() + 24 * 3600_000)
    expect(res.headers.get('x-m2m-storage-used')).toBe('3000')
    expect((await blobRecords(t)).filter((r) => r.hash === first.hash)).toHaveLength(1)
  })

  test('two owners, identical bytes: two records, one file on disk', async () => {
    const bytes = randomContent(4000)
    const a = await json(await rawUpload(t, t.client(), bytes))
    const res = await rawUpload(t, t.client(), bytes)
    expect(res.status).toBe(201)
    const b = await json(res)
    expect(b.blob_id).not.toBe(a.blob_id)
    expect(b.hash).toBe(a.hash)
    expect((await blobRecords(t)).filter((r) => r.hash === a.hash)).toHaveLength(2)
    expect(blobFiles(t).filter((f) => f.endsWith(a.hash))).toHaveLength(1)
    expect(tempFiles(t)).toEqual([])
  })
})

describe('413 payload_too_large', () => {
  test('Content-Length over the limit is refused before a byte is read', async () => {
    const a = t.client()
    let pulled = 0
    const body = new ReadableStream<Uint8Array>({
      pull(c) {
        pulled++
        c.enqueue(new Uint8Array(1024))
      },
    })
    const e = await expectError(await rawUpload(t, a, new Uint8Array(0), { body, headers: { 'content-length': String(MAX + 1) } }), 413, 'payload_too_large')
    expect(e.details).toEqual({ limit_bytes: MAX })
    expect(pulled).toBeLessThanOrEqual(1) // a stream may pre-pull one chunk; the relay reads none
    expect(tempFiles(t)).toEqual([])
  })

  test('with Content-Length: exactly the limit passes, one byte more is refused', async () => {
    const a = t.client()
    expect((await rawUpload(t, a, randomContent(MAX))).status).toBe(201)
    const before = blobFiles(t)
    await expectError(await rawUpload(t, a, randomContent(MAX + 1)), 413, 'payload_too_large')
    expect(blobFiles(t)).toEqual(before)
    expect(tempFiles(t)).toEqual([])
  })

  test('without Content-Length: cut off once past the limit, nothing kept', async () => {
    const a = t.client()
    const records = (await blobRecords(t)).length
    const before = blobFiles(t)
    const bytes = randomContent(MAX * 3)
    let sent = 0
    const body = new ReadableStream<Uint8Array>({
      pull(c) {
        if (sent >= bytes.length) return c.close()
        c.enqueue(bytes.slice(sent, sent + 4096))
        sent += 4096
      },
    })
    const res = await rawUpload(t, a, bytes, { body })
    await expectError(res, 413, 'payload_too_large')
    expect(res.headers.get('x-m2m-storage-limit')).toBe(String(QUOTA))
    expect(sent).toBeLessThan(bytes.length) // stopped reading, not drained
    expect((await blobRecords(t))).toHaveLength(records)
    expect(blobFiles(t)).toEqual(before)
    expect(tempFiles(t)).toEqual([])
  })
})

describe('507 insufficient_storage', () => {
  test('a blob that would pass the quota is refused with both storage headers; identical content still answers 200', async () => {
    const a = t.client()
    const big = randomContent(MAX)
    for (let i = 0; i < 3; i++) expect((await rawUpload(t, a, randomContent(MAX))).status).toBe(201)
    const used = 3 * MAX
    const keep = randomContent(QUOTA - used - 10)
    const kept = await json(await rawUpload(t, a, keep))
    const before = blobFiles(t)
    const res = await rawUpload(t, a, big)
    const e = await expectError(res, 507, 'insufficient_storage')
    expect(e.details).toEqual({ size: MAX, used_bytes: QUOTA - 10, limit_bytes: QUOTA })
    expect(res.headers.get('x-m2m-storage-used')).toBe(String(QUOTA - 10))
    expect(res.headers.get('x-m2m-storage-limit')).toBe(String(QUOTA))
    expect(blobFiles(t)).toEqual(before)
    expect(tempFiles(t)).toEqual([])
    // re-uploading what you own costs nothing, so it is not refused
    const again = await rawUpload(t, a, keep)
    expect(again.status).toBe(200)
    expect((await json(again)).blob_id).toBe(kept.blob_id)
    // the same, streamed without Content-Length
    await expectError(await rawUpload(t, a, big, { body: chunked(big, 5000) }), 507, 'insufficient_storage')
    expect(blobFiles(t)).toEqual(before)
    // 10 bytes still fit
    expect((await rawUpload(t, a, randomContent(10))).status).toBe(201)
    await expectError(await rawUpload(t, a, randomContent(1)), 507, 'insufficient_storage')
  })

  test('uploads at the same moment: the quota holds, and identical bytes make one record', async () => {
    const a = t.client()
    // 4 × 60 KiB against a 200 KiB quota: 3 fit, the 4th is refused, whatever their order
    const parts = Array.from({ length: 4 }, () => randomContent(60 * 1024))
    const statuses = (await Promise.all(parts.map((p) => rawUpload(t, a, p)))).map((r) => r.status)
    expect(statuses.sort()).toEqual([201, 201, 201, 507])
    const b = t.client()
    const same = randomContent(1024)
    const answers = await Promise.all(Array.from({ length: 4 }, () => rawUpload(t, b, same)))
    expect(answers.map((r) => r.status).sort()).toEqual([200, 200, 200, 201])
    expect(new Set(await Promise.all(answers.map(async (r) => ((await r.json()) as { blob_id: string }).blob_id))).size).toBe(1)
  })

  test('expired blobs stop counting at once', async () => {
    const local = await startTestRelay({ blobs: { maxSizeBytes: MAX, quotaBytes: MAX } })
    try {
      const a = local.client()
      expect((await rawUpload(local, a, randomContent(MAX))).status).toBe(201)
      await expectError(await rawUpload(local, a, randomContent(1)), 507, 'insufficient_storage')
      local.clock.advance(24 * 3600_000)
      expect((await rawUpload(local, a, randomContent(MAX))).status).toBe(201)
    } finally {
      await local.close()
    }
  })
})

describe('what the signature covers', () => {
  test('bytes that differ from the signed hash: 401 invalid_signature, nothing kept', async () => {
    const a = t.client()
    const records = (await blobRecords(t)).length
    const before = blobFiles(t)
    const signedBytes = randomContent(20_000)
    const sent = signedBytes.slice()
    sent[12_345] ^= 1
    const res = await rawUpload(t, a, sent, { signedBytes })
    await expectError(res, 401, 'invalid_signature')
    expect(res.headers.get('x-m2m-storage-limit')).toBe(String(QUOTA))
    expect(res.headers.get('x-m2m-storage-used')).toBeNull() // nothing said about an unverified key
    await expectError(await rawUpload(t, a, sent, { signedBytes, body: chunked(sent, 3000) }), 401, 'invalid_signature')
    await expectError(await rawUpload(t, a, sent.subarray(0, 19_999), { signedBytes }), 401, 'invalid_signature')
    expect((await blobRecords(t))).toHaveLength(records)
    expect(blobFiles(t)).toEqual(before)
    expect(tempFiles(t)).toEqual([])
  })

  test('bad headers and stale timestamps fail before the body is read', async () => {
    const a = t.client()
    for (const [headers, code] of [
      [{ 'X-M2M-Signature': 'nope' }, 'unauthorized'],
      [{ 'X-M2M-Timestamp': new Date(t.clock.now() - 301_000).toISOString() }, 'timestamp_expired'],
    ] as const) {
      let pulled = 0
      const body = new ReadableStream<Uint8Array>({
        pull(c) {
          pulled++
          c.enqueue(new Uint8Array(10))
        },
      })
      await expectError(await rawUpload(t, a, enc('x'), { body, headers }), 401, code)
      expect(pulled).toBeLessThanOrEqual(1)
    }
    expect(tempFiles(t)).toEqual([])
  })

  test('a replayed upload: 409 replay_detected', async () => {
    const a = t.client()
    const bytes = randomContent(100)
    const { uploadRequest, keysOf } = await import('./helpers.ts')
    const req = uploadRequest(t, keysOf(a), bytes)
    const copy = req.clone() as unknown as Request
    expect((await t.handle(req)).status).toBe(201)
    await expectError(await t.handle(copy), 409, 'replay_detected')
  })

  test('the path signed is the path sent: a query string that was not signed fails; one that was is 400', async () => {
    const a = t.client()
    const bytes = randomContent(100)
    const { uploadRequest, keysOf } = await import('./helpers.ts')
    const signedPlain = uploadRequest(t, keysOf(a), bytes)
    await expectError(await t.handle(new Request(signedPlain.url + '?x=1', signedPlain)), 401, 'invalid_signature')
    const res = await rawUpload(t, a, bytes, { path: '/v1/blobs?x=1' })
    const e = await expectError(res, 400, 'bad_request')
    expect(e.details.fields).toEqual({ x: 'unknown parameter' })
    expect(res.headers.get('x-m2m-storage-limit')).toBe(String(QUOTA))
    expect(tempFiles(t)).toEqual([])
  })

  test('a content type over 255 characters: 400 after the signature is checked', async () => {
    const e = await expectError(await rawUpload(t, t.client(), enc('x'), { contentType: 'a/' + 'b'.repeat(254) }), 400, 'bad_request')
    expect(Object.keys(e.details.fields)).toEqual(['content-type'])
  })
})
