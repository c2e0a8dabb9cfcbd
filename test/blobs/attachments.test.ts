/** Attachments on send (docs/protocol.md §4.1, §4.3 check 4) and how they tie a blob's lifetime to its messages (§6). */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { RelayClient } from '../../src/client/index.ts'
import { sqliteOnly } from '../support/backend.ts'
import { expectError, startTestRelay, type TestRelay } from '../support/harness.ts'
import { blobRecords, enc, sha256Hex, sweep, uploadText } from './helpers.ts'

let t: TestRelay
beforeAll(async () => {
  t = await startTestRelay({ rateLimits: { sendPerMin: 0, pollPerMin: 0 } })
})
afterAll(() => t.close())

const rawSend = (c: RelayClient, body: unknown) => c.transport.send('POST', '/v1/messages', body)
const HOUR = 3600_000

describe('a send with attachments', () => {
  test('content_type, size and hash come from the record; filename and the e2e fields are kept as given', async () => {
    const a = t.client()
    const b = t.client()
    const x = await uploadText(a, 'attachment one', 'text/plain')
    const y = await a.uploadBlob(enc('{"k":1}'), { contentType: 'application/json' })
    const sent = await a.send({
      recipient_key: b.publicKey,
      attachments: [
        { blob_id: x.blob_id, filename: 'one.txt', content_type: 'image/png', size: 1, hash: 'f'.repeat(64) },
        { blob_id: y.blob_id, encrypted: true, dek_enc: 'wrapped-key', dek_ct: 'nonce+tag' },
      ],
    })
    const m = await b.getMessage(sent.message_id)
    expect(m.body).toBeUndefined()
    expect(m.attachments).toEqual([
      { blob_id: x.blob_id, filename: 'one.txt', content_type: 'text/plain', size: 14, hash: sha256Hex('attachment one'), encrypted: false },
      { blob_id: y.blob_id, content_type: 'application/json', size: 7, hash: sha256Hex('{"k":1}'), encrypted: true, dek_enc: 'wrapped-key', dek_ct: 'nonce+tag' },
    ])
    expect(Object.keys(m.attachments![1])).toEqual(['blob_id', 'content_type', 'size', 'hash', 'encrypted', 'dek_enc', 'dek_ct'])
    // the recipient fetches the bytes named by the message
    expect(await (await b.downloadBlob(x.blob_id)).text()).toBe('attachment one')
  })

  test('a body and ten attachments (the same blob may appear twice)', async () => {
    const a = t.client()
    const blobs = await Promise.all(Array.from({ length: 9 }, (_, i) => uploadText(a, `file ${i}`)))
    const attachments = [...blobs, blobs[0]].map((b) => ({ blob_id: b.blob_id }))
    const sent = await a.send({ recipient_key: t.client().publicKey, body: { text: 'see attached' }, attachments })
    expect((await a.getMessage(sent.message_id)).attachments).toHaveLength(10)
  })

  test('the poll shows attachments; a message expired shows none', async () => {
    const a = t.client()
    const b = t.client()
    const x = await uploadText(a, 'polled')
    await a.send({ recipient_key: b.publicKey, attachments: [{ blob_id: x.blob_id, filename: 'p.txt' }], expires_in: 10 })
    const page = await b.poll()
    expect(page.messages[0].attachments?.[0].filename).toBe('p.txt')
    const sent2 = await a.send({ recipient_key: b.publicKey, attachments: [{ blob_id: x.blob_id }], expires_in: 10 })
    t.clock.advance(10_000)
    const expired = await a.getMessage(sent2.message_id)
    expect(expired.status).toBe('expired')
    expect(expired.attachments).toEqual([])
  })
})

describe('422 unprocessable_entity naming the blob ids', () => {
  test("unknown, malformed, someone else's, expired and deleted blobs; all named, in order, nothing sent", async () => {
    const a = t.client()
    const other = t.client()
    const mine = await uploadText(a, 'mine ' + Math.random())
    const theirs = await uploadText(other, 'theirs ' + Math.random())
    const deleted = await uploadText(a, 'deleted ' + Math.random())
    await a.deleteBlob(deleted.blob_id)
    const expiring = await uploadText(a, 'expiring ' + Math.random())
    t.clock.advance(24 * HOUR)
    const fresh = await uploadText(a, 'fresh ' + Math.random())
    const unknown = 'blob_' + '0'.repeat(24)
    const ids = [unknown, 'not-a-blob-id', theirs.blob_id, deleted.blob_id, expiring.blob_id, mine.blob_id]
    const res = await rawSend(a, { recipient_key: other.publicKey, body: 1, attachments: [...ids, fresh.blob_id].map((blob_id) => ({ blob_id })) })
    const e = await expectError(res, 422, 'unprocessable_entity')
    expect(e.details).toEqual({ blob_ids: ids })
    for (const id of ids) expect(e.message).toContain(id)
    expect(res.headers.get('x-ratelimit-limit')).toBeNull() // unlimited here; limits apply after this check
    expect((await other.poll()).messages).toHaveLength(0)
  })

  test('the recipient of a blob cannot forward it: attaching needs ownership', async () => {
    const a = t.client()
    const b = t.client()
    const x = await uploadText(a, 'forward me ' + Math.random())
    await a.send({ recipient_key: b.publicKey, attachments: [{ blob_id: x.blob_id }] })
    const e = await expectError(await rawSend(b, { recipient_key: t.client().publicKey, attachments: [{ blob_id: x.blob_id }] }), 422, 'unprocessable_entity')
    expect(e.details.blob_ids).toEqual([x.blob_id])
  })

  test('a send attaching a blob and its owner deleting it at the same moment: one of the two wins, never both', async () => {
    const a = t.client()
    const b = t.client()
    const outcomes = new Set<string>()
    for (let i = 0; i < 40; i++) {
      const x = await uploadText(a, `contested ${i} ${Math.random()}`)
      const [sent, deleted] = await Promise.all([
        rawSend(a, { recipient_key: b.publicKey, attachments: [{ blob_id: x.blob_id }] }),
        a.transport.send('DELETE', `/v1/blobs/${x.blob_id}`),
      ])
      const outcome = `${sent.status}/${deleted.status}`
      outcomes.add(outcome)
      // sent first: the delete is refused (409 blob_referenced) and the recipient can read it; deleted
      // first: the send is refused (422)
      expect(['201/409', '422/204']).toContain(outcome)
      if (sent.status === 201) expect((await b.downloadBlob(x.blob_id)).status).toBe(200)
    }
  }, 30_000)

  // SQLite only: the delete must land between the send's check and its commit, which a synchronous
  // write to the file does; on PostgreSQL a statement from outside cannot be placed there
  sqliteOnly('a blob deleted between the check and the commit refuses the send in its transaction', async () => {
    const a = t.client()
    const x = await uploadText(a, 'racing ' + Math.random())
    const svc = t.relay.features.messages.messages
    const pending = svc.send({ publicKey: a.publicKey } as any, { recipient_key: t.client().publicKey, attachments: [{ blob_id: x.blob_id }] })
    t.relay.sqlite!.run('DELETE FROM blobs WHERE blob_id = ?', [x.blob_id])
    await expect(pending).rejects.toMatchObject({ code: 'unprocessable_entity', details: { blob_ids: [x.blob_id] } })
    const links = t.relay.sqlite!.query('SELECT count(*) AS n FROM message_blobs WHERE blob_id = ?').get(x.blob_id) as { n: number }
    expect(links.n).toBe(0)
  })
})

describe('lifetime (docs/protocol.md §6)', () => {
  const expiresOf = async (id: string) => (await blobRecords(t)).find((r) => r.blob_id === id)!.expires_at

  test('attaching extends the blob to the latest expiry of its messages, never shortens it', async () => {
    const a = t.client()
    const x = await uploadText(a, 'lifetime ' + Math.random())
    const uploadedExpiry = Date.parse(x.expires_at)
    await a.send({ recipient_key: t.client().publicKey, attachments: [{ blob_id: x.blob_id }], expires_in: 3600 })
    expect(await expiresOf(x.blob_id)).toBe(uploadedExpiry) // 1 h message, 24 h blob: unchanged
    const long = await a.send({ recipient_key: t.client().publicKey, attachments: [{ blob_id: x.blob_id }], expires_in: 3 * 86400 })
    expect(await expiresOf(x.blob_id)).toBe(Date.parse(long.expires_at))
    await a.send({ recipient_key: t.client().publicKey, attachments: [{ blob_id: x.blob_id }], expires_in: 2 * 86400 })
    expect(await expiresOf(x.blob_id)).toBe(Date.parse(long.expires_at))
    // re-uploading the content returns the record with that expiry
    const again = await uploadText(a, (await (await a.downloadBlob(x.blob_id)).text()))
    expect(Date.parse(again.expires_at)).toBe(Date.parse(long.expires_at))
  })

  test('an attached blob outlives its unattached lifetime and goes with its last message', async () => {
    const a = t.client()
    const b = t.client()
    const x = await uploadText(a, 'outlives ' + Math.random())
    await a.send({ recipient_key: b.publicKey, attachments: [{ blob_id: x.blob_id }], expires_in: 2 * 86400 })
    t.clock.advance(25 * HOUR)
    await sweep(t)
    expect((await b.downloadBlob(x.blob_id)).status).toBe(200)
    t.clock.advance(23 * HOUR)
    await t.relay.scheduler.runNow('expire-messages')
    const swept = await sweep(t)
    expect(swept.expired_records).toBeGreaterThanOrEqual(1)
    expect((await blobRecords(t)).some((r) => r.blob_id === x.blob_id)).toBe(false)
    await expectError(await a.transport.send('GET', `/v1/blobs/${x.blob_id}`), 404, 'blob_not_found')
  })
})
