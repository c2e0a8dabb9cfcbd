/** DELETE /v1/blobs/{blobID} (docs/protocol.md §6): owner only, never while an unexpired message attaches it. */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { expectError, startTestRelay, type TestRelay } from '../support/harness.ts'
import { blobFiles, blobRecords, sweep, uploadText } from './helpers.ts'

let t: TestRelay
beforeAll(async () => {
  t = await startTestRelay({ rateLimits: { sendPerMin: 0, pollPerMin: 0 } })
})
afterAll(() => t.close())

const del = (c: ReturnType<TestRelay['client']>, id: string) => c.transport.send('DELETE', `/v1/blobs/${id}`)

test('the owner deletes: 204, then 404; the file goes with the next sweep', async () => {
  const a = t.client()
  const b = await uploadText(a, 'to be deleted')
  const res = await del(a, b.blob_id)
  expect(res.status).toBe(204)
  expect(await res.text()).toBe('')
  await expectError(await del(a, b.blob_id), 404, 'blob_not_found')
  await expectError(await a.transport.send('GET', `/v1/blobs/${b.blob_id}`), 404, 'blob_not_found')
  expect(blobFiles(t).some((f) => f.endsWith(b.hash))).toBe(true)
  await sweep(t)
  expect(blobFiles(t).some((f) => f.endsWith(b.hash))).toBe(false)
})

test("deleting one owner's record keeps the bytes another owner still has", async () => {
  const a = t.client()
  const b = t.client()
  const x = await uploadText(a, 'two owners, one file')
  const y = await uploadText(b, 'two owners, one file')
  await a.deleteBlob(x.blob_id)
  await sweep(t)
  expect(blobFiles(t).filter((f) => f.endsWith(x.hash))).toHaveLength(1)
  expect(await (await b.downloadBlob(y.blob_id)).text()).toBe('two owners, one file')
})

test('a stranger gets 404; a reader who is not the owner gets 403 forbidden', async () => {
  const owner = t.client()
  const recipient = t.client()
  const stranger = t.client()
  const b = await uploadText(owner, 'not yours')
  await owner.send({ recipient_key: recipient.publicKey, attachments: [{ blob_id: b.blob_id }] })
  await expectError(await del(stranger, b.blob_id), 404, 'blob_not_found')
  await expectError(await del(recipient, b.blob_id), 403, 'forbidden')
  expect((await blobRecords(t)).some((r) => r.blob_id === b.blob_id)).toBe(true)
})

test('409 blob_referenced while an unexpired message attaches it; 204 once it expired', async () => {
  const owner = t.client()
  const b = await uploadText(owner, 'attached ' + Math.random())
  const m = await owner.send({ recipient_key: t.client().publicKey, attachments: [{ blob_id: b.blob_id }], expires_in: 120 })
  const e = await expectError(await del(owner, b.blob_id), 409, 'blob_referenced')
  expect(e.details).toEqual({ blob_id: b.blob_id })
  t.clock.advance(119_999)
  await expectError(await del(owner, b.blob_id), 409, 'blob_referenced')
  t.clock.advance(1)
  expect(Date.parse(m.expires_at)).toBe(t.clock.now())
  // the message is gone; the blob keeps its own (longer) unattached lifetime and may now be deleted
  expect((await del(owner, b.blob_id)).status).toBe(204)
})

test('a delivered message still protects its attachment until it expires', async () => {
  const owner = t.client()
  const recipient = t.client()
  const b = await uploadText(owner, 'delivered ' + Math.random())
  await owner.send({ recipient_key: recipient.publicKey, attachments: [{ blob_id: b.blob_id }], expires_in: 30 * 86400 })
  expect((await recipient.poll()).messages).toHaveLength(1)
  await expectError(await del(owner, b.blob_id), 409, 'blob_referenced')
})
