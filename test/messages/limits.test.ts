/** docs/protocol.md §4.1, §4.3 and §12 limits of POST /v1/messages: 413s, and 400 naming each field. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { MAX_JSON_REQUEST_BYTES } from '../../src/http/app.ts'
import { expectError, startTestRelay, type TestRelay } from '../support/harness.ts'
import { signed } from '../support/signed.ts'
import { UNLIMITED, agent, rawSend, unknownKey } from './helpers.ts'
import type { RelayClient } from '../../src/client/index.ts'

let t: TestRelay
let a: RelayClient
const to = unknownKey()
beforeAll(async () => {
  t = await startTestRelay(UNLIMITED)
  a = await agent(t)
})
afterAll(() => t.close())

const MiB = 1024 * 1024

/** Asserts a 400 whose details name exactly `fields`. */
async function expectFields(body: unknown, fields: string[]) {
  const e = await expectError(await rawSend(a, body), 400, 'bad_request')
  expect(Object.keys(e.details.fields).sort()).toEqual([...fields].sort())
  return e
}

describe('413 payload_too_large', () => {
  test('a request over 2 MiB is refused from Content-Length, before the body is read or parsed', async () => {
    let pulled = 0
    const stream = new ReadableStream({
      pull(ctrl) {
        pulled++
        ctrl.enqueue(new Uint8Array(64 * 1024))
        if (pulled > 40) ctrl.close()
      },
    })
    const req = signed(a.transport.keys, 'POST', '/v1/messages', { nowMs: t.clock.now(), body: '{}', headers: { 'content-length': String(MAX_JSON_REQUEST_BYTES + 1) } })
    const withStream = new Request(req.url, { method: 'POST', headers: req.headers, body: stream, duplex: 'half' } as RequestInit)
    await expectError(await t.handle(withStream), 413, 'payload_too_large')
    expect(pulled).toBeLessThanOrEqual(2)
  })

  test('a 2 MiB + 1 byte JSON request → 413 even though it is valid JSON', async () => {
    const body = JSON.stringify({ recipient_key: to, body: 'y'.repeat(2 * MiB) })
    await expectError(await a.transport.send('POST', '/v1/messages', body, { 'content-type': 'application/json' }), 413, 'payload_too_large')
  })

  test('a serialized body over 1 MiB → 413; exactly 1 MiB is accepted', async () => {
    const e = await expectError(await rawSend(a, { recipient_key: to, body: 'x'.repeat(MiB - 1) }), 413, 'payload_too_large')
    expect(e.details).toEqual({ field: 'body', limit_bytes: MiB })
    // a JSON string serializes with its two quotes: MiB - 2 characters is exactly 1 MiB
    expect((await rawSend(a, { recipient_key: to, body: 'x'.repeat(MiB - 2) })).status).toBe(201)
    // multi-byte characters count in UTF-8 bytes
    await expectError(await rawSend(a, { recipient_key: to, body: 'é'.repeat(MiB / 2) }), 413, 'payload_too_large')
    await expectError(await rawSend(a, { recipient_key: to, body: { list: Array(300_000).fill('abc') } }), 413, 'payload_too_large')
  })
})

describe('400 bad_request names each offending field', () => {
  test('malformed JSON and a non-object body', async () => {
    await expectError(await a.transport.send('POST', '/v1/messages', '{"recipient_key":', { 'content-type': 'application/json' }), 400, 'bad_request')
    await expectError(await rawSend(a, [1, 2]), 400, 'bad_request')
    await expectError(await a.transport.send('POST', '/v1/messages'), 400, 'bad_request')
  })
  test('recipient_key missing or malformed', async () => {
    await expectFields({ body: 1 }, ['recipient_key'])
    for (const bad of ['', 'short', to + 'x', to.slice(0, 42) + '=', 42, null]) await expectFields({ recipient_key: bad, body: 1 }, ['recipient_key'])
  })
  test('unknown fields are ignored, never stored (priority, __proto__, constructor, toString)', async () => {
    const text = `{"recipient_key":"${a.publicKey}","body":1,"priority":"high","__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}},"toString":7}`
    const res = await a.transport.send('POST', '/v1/messages', text, { 'content-type': 'application/json' })
    expect(res.status).toBe(201)
    const m: any = await a.getMessage(((await res.json()) as any).message_id)
    for (const k of ['priority', 'toString', 'constructor']) expect(Object.hasOwn(m, k)).toBe(false)
    expect(({} as any).polluted).toBeUndefined()
    expect(Object.prototype.hasOwnProperty.call(Object.prototype, 'polluted')).toBe(false)
  })
  test('several bad fields are all named', async () => {
    await expectFields({ recipient_key: 'x', body: 1, expires_in: 0, thread_id: 5, metadata: [] }, ['recipient_key', 'expires_in', 'thread_id', 'metadata'])
  })
  test('expires_in bounds: 1 and 2,592,000 accepted; 0, 2,592,001, fractions, strings refused; null is the default', async () => {
    const absent: any = await (await rawSend(a, { recipient_key: to, body: 1, expires_in: null })).json()
    expect(Date.parse(absent.expires_at) - Date.parse(absent.created_at)).toBe(604_800_000)
    for (const ok of [1, 2_592_000]) {
      const res = await rawSend(a, { recipient_key: to, body: 1, expires_in: ok })
      expect(res.status).toBe(201)
      const out: any = await res.json()
      expect(Date.parse(out.expires_at) - Date.parse(out.created_at)).toBe(ok * 1000)
    }
    for (const bad of [0, -1, 2_592_001, 1.5, '60']) await expectFields({ recipient_key: to, body: 1, expires_in: bad }, ['expires_in'])
  })
  test('content_type ≤ 255 characters', async () => {
    expect((await rawSend(a, { recipient_key: to, body: 1, content_type: 'c'.repeat(255) })).status).toBe(201)
    await expectFields({ recipient_key: to, body: 1, content_type: 'c'.repeat(256) }, ['content_type'])
    await expectFields({ recipient_key: to, body: 1, content_type: 7 }, ['content_type'])
  })
  test('thread_id ≤ 128 characters', async () => {
    expect((await rawSend(a, { recipient_key: to, body: 1, thread_id: 't'.repeat(128) })).status).toBe(201)
    await expectFields({ recipient_key: to, body: 1, thread_id: 't'.repeat(129) }, ['thread_id'])
    await expectFields({ recipient_key: to, body: 1, thread_id: '' }, ['thread_id'])
  })
  test('in_reply_to is a string', async () => {
    await expectFields({ recipient_key: to, body: 1, in_reply_to: 12 }, ['in_reply_to'])
    await expectFields({ recipient_key: to, body: 1, in_reply_to: 'm'.repeat(129) }, ['in_reply_to'])
  })
  test('metadata is an object of at most 16 KiB serialized', async () => {
    const fits = { k: 'v'.repeat(16 * 1024 - 8) } // {"k":"…"} is 8 bytes of framing
    expect(JSON.stringify(fits).length).toBe(16 * 1024)
    expect((await rawSend(a, { recipient_key: to, body: 1, metadata: fits })).status).toBe(201)
    await expectFields({ recipient_key: to, body: 1, metadata: { k: 'v'.repeat(16 * 1024 - 7) } }, ['metadata'])
    for (const bad of ['text', [1], 3]) await expectFields({ recipient_key: to, body: 1, metadata: bad }, ['metadata'])
  })
  test('at most 10 attachments; each needs a blob_id (unknown attachment fields are ignored)', async () => {
    const att = (i: number) => ({ blob_id: `blob_${i}` })
    await expectFields({ recipient_key: to, attachments: Array.from({ length: 11 }, (_, i) => att(i)) }, ['attachments'])
    const e = await expectFields({ recipient_key: to, attachments: [{ filename: 'a.txt' }, { blob_id: 'b', extra: 1 }, ''] }, ['attachments[0].blob_id', 'attachments[2].blob_id'])
    expect(e.details.fields['attachments[0].blob_id']).toBeTruthy()
    await expectFields({ recipient_key: to, attachments: [{ blob_id: 'b', filename: 'f'.repeat(256) }] }, ['attachments[0].filename'])
    await expectFields({ recipient_key: to, attachments: [{ blob_id: 'b', dek_enc: 'k'.repeat(4097) }] }, ['attachments[0].dek_enc'])
    await expectFields({ recipient_key: to, attachments: [{ blob_id: 'b', encrypted: 'yes' }] }, ['attachments[0].encrypted'])
    await expectFields({ recipient_key: to, attachments: 'blob_1' }, ['attachments'])
  })
})

describe('422 unprocessable_entity', () => {
  test('neither body nor attachments (a null body counts as none; an empty array too)', async () => {
    for (const body of [{ recipient_key: to }, { recipient_key: to, body: null }, { recipient_key: to, attachments: [] }]) {
      await expectError(await rawSend(a, body), 422, 'unprocessable_entity')
    }
  })
  test('10 attachments pass the shape check; unknown blobs are refused naming every blob id', async () => {
    const ids = Array.from({ length: 10 }, (_, i) => `blob_${i}`)
    const e = await expectError(await rawSend(a, { recipient_key: to, body: 1, attachments: ids.map((blob_id) => ({ blob_id })) }), 422, 'unprocessable_entity')
    expect(e.details.blob_ids).toEqual(ids)
    for (const id of ids) expect(e.message).toContain(id)
  })
})
