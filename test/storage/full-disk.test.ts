/**
 * A database that cannot grow (a full disk; here SQLite's max_page_count makes it so) answers 507
 * insufficient_storage in the envelope — never 500 — for sends, polls and a new agent's first request;
 * reads keep working, nothing is half written, and writes resume once there is room again.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { expectError, startTestRelay, type TestRelay } from '../support/harness.ts'

let t: TestRelay
beforeAll(async () => {
  t = await startTestRelay({ rateLimits: { sendPerMin: 0, pollPerMin: 0, requestsPerMin: 0 } })
})
afterAll(() => t.close())

/** Fills the database file to its current size, so that the next write needs a page it cannot have. */
function fillUp(): () => void {
  const db = t.relay.sqlite!
  const pages = (db.query('PRAGMA page_count').get() as { page_count: number }).page_count
  db.run(`PRAGMA max_page_count = ${pages}`)
  // use up the free pages too
  try {
    for (let i = 0; i < 10_000; i++) db.run(`INSERT INTO relay_state (key, value) VALUES (?, ?)`, [`filler-${i}`, 'x'.repeat(2000)])
  } catch {
    // full
  }
  return () => {
    db.run('PRAGMA max_page_count = 1073741823')
    db.run(`DELETE FROM relay_state WHERE key LIKE 'filler-%'`)
  }
}

test('sends, polls and new agents answer 507 while the disk is full, then work again', async () => {
  const [a, b] = [t.client(), t.client()]
  await a.getAgent()
  await b.getAgent()
  const first = await a.send({ recipient_key: b.publicKey, body: { n: 1 } })
  const release = fillUp()
  try {
    const send = await a.transport.send('POST', '/v1/messages', { recipient_key: b.publicKey, body: { n: 2, pad: 'y'.repeat(50_000) } })
    const err = await expectError(send, 507, 'insufficient_storage')
    expect(err.message).toMatch(/disk/)
    // a new agent's first request: its record fits in a page still free, or the answer is 507 — never 500
    const fresh = t.client()
    const res = await fresh.transport.send('GET', `/v1/agents/${fresh.publicKey}`)
    if (res.status !== 200) await expectError(res, 507, 'insufficient_storage')
    const poll = await b.transport.send('GET', '/v1/messages?limit=1&status=delivered')
    expect(poll.status).toBe(200)
    // reads of what is stored still work
    expect((await a.messageStatus(first.message_id)).status).toBe('sent')
  } finally {
    release()
  }
  const page = await b.poll()
  expect(page.messages.map((m) => m.body)).toEqual([{ n: 1 }])
  expect((await a.send({ recipient_key: b.publicKey, body: { n: 3 } })).status).toBe('sent')
})
