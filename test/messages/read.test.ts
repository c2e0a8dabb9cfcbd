/** Reading by id, status and threads (docs/protocol.md §4.2, §4.5), and who may read (docs/protocol.md §1.3). */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { RelayClient } from '../../src/client/index.ts'
import { expectError, startTestRelay, type TestRelay } from '../support/harness.ts'
import { UNLIMITED, agent, msg, rawGet } from './helpers.ts'

let t: TestRelay
beforeAll(async () => {
  t = await startTestRelay(UNLIMITED)
})
afterAll(() => t.close())

const iso = () => new Date(t.clock.now()).toISOString()

describe('GET /v1/messages/{id}', () => {
  test('the sender reads without delivering; the recipient’s read marks it delivered', async () => {
    const [a, b] = [await agent(t), await agent(t)]
    const { message_id } = await a.send(msg(b))
    expect((await a.getMessage(message_id)).status).toBe('sent')
    t.clock.advance(2500)
    const read = await b.getMessage(message_id)
    expect(read.status).toBe('delivered')
    expect(read.delivered_at).toBe(iso())
    t.clock.advance(1000)
    const again = await b.getMessage(message_id)
    expect(again.delivered_at).toBe(read.delivered_at) // delivered once
    expect((await a.getMessage(message_id)).status).toBe('delivered')
    expect((await b.poll()).messages).toEqual([]) // no longer pending
  })

  test('third parties get 404 message_not_found for read and status, the same as an unknown id', async () => {
    const [a, b, c] = [await agent(t), await agent(t), await agent(t)]
    const { message_id } = await a.send(msg(b))
    const unknown = await expectError(await rawGet(c, '/v1/messages/msg_1795341600_0123456789ab'), 404, 'message_not_found')
    const hidden = await expectError(await rawGet(c, `/v1/messages/${message_id}`), 404, 'message_not_found')
    expect(hidden.message).toBe(unknown.message)
    await expectError(await rawGet(c, `/v1/messages/${message_id}/status`), 404, 'message_not_found')
    expect((await a.messageStatus(message_id)).status).toBe('sent') // the attempt delivered nothing
    for (const odd of ['x', '%00', 'msg_' + 'f'.repeat(300), "'; DROP TABLE messages; --"]) {
      await expectError(await rawGet(c, `/v1/messages/${encodeURIComponent(odd)}`), 404, 'message_not_found')
    }
  })
})

describe('GET /v1/messages/{id}/status', () => {
  test('fields, for sender and recipient, without changing anything', async () => {
    const [a, b] = [await agent(t), await agent(t)]
    const sent = await a.send(msg(b, { expires_in: 3600 }))
    const s1 = await b.messageStatus(sent.message_id)
    expect(s1).toEqual({ message_id: sent.message_id, status: 'sent', created_at: sent.created_at, expires_at: sent.expires_at })
    await b.poll()
    const s2 = await a.messageStatus(sent.message_id)
    expect(s2).toEqual({ ...s1, status: 'delivered', delivered_at: iso() })
  })
})

describe('GET /v1/messages/threads/{threadID}', () => {
  async function conversation(a: RelayClient, b: RelayClient, threadId: string, n: number) {
    const ids: string[] = []
    for (let i = 0; i < n; i++) {
      const [from, to] = i % 2 ? [b, a] : [a, b]
      ids.push((await from.send(msg(to, { thread_id: threadId, body: i }))).message_id)
      if (i % 3 === 0) t.clock.advance(1)
    }
    // the relay's order: created_at, then message_id within one millisecond
    const created = new Map<string, number>()
    for (const id of ids) created.set(id, (await t.relay.features.messages.messages.findRow(id))!.createdAt)
    const at = (id: string) => created.get(id)!
    return ids.sort((x, y) => at(x) - at(y) || (x < y ? -1 : 1))
  }

  test('what the caller sent or received in the thread, oldest first, paged, no status change', async () => {
    const [a, b, c, d] = [await agent(t), await agent(t), await agent(t), await agent(t)]
    const ids = await conversation(a, b, 'plan/42 ü', 25)
    await c.send(msg(d, { thread_id: 'plan/42 ü' })) // same thread id, other parties
    await a.send(msg(b, { thread_id: 'other' }))
    const seen: string[] = []
    let cursor: string | undefined
    do {
      const page = await a.thread('plan/42 ü', { limit: 10, cursor })
      seen.push(...page.messages.map((m) => m.message_id))
      expect(page.next_cursor === null).toBe(!page.has_more)
      cursor = page.next_cursor ?? undefined
    } while (cursor)
    expect(seen).toEqual(ids)
    // nothing was delivered by listing
    expect((await b.poll({ limit: 100 })).messages.filter((m) => m.thread_id === 'plan/42 ü').length).toBe(13)
    expect((await d.thread('plan/42 ü')).messages.length).toBe(1)
    expect((await c.thread('no-such-thread')).messages).toEqual([])
    expect((await c.thread('no-such-thread')).has_more).toBe(false)
  })

  test('bad parameters → 400', async () => {
    const a = await agent(t)
    await expectError(await rawGet(a, `/v1/messages/threads/${'t'.repeat(129)}`), 400, 'bad_request')
    await expectError(await rawGet(a, '/v1/messages/threads/x?limit=0'), 400, 'bad_request')
    await expectError(await rawGet(a, '/v1/messages/threads/x?cursor=nope'), 400, 'bad_request')
    await expectError(await rawGet(a, '/v1/messages/threads/x?status=sent'), 400, 'bad_request')
  })
})

test('deleting an agent removes the messages addressed to it; those it sent stay', async () => {
  const [a, b] = [await agent(t), await agent(t)]
  const toA = await b.send(msg(a))
  const fromA = await a.send(msg(b))
  await a.deleteAgent()
  await expectError(await rawGet(b, `/v1/messages/${toA.message_id}`), 404, 'message_not_found')
  expect((await b.getMessage(fromA.message_id)).sender_key).toBe(a.publicKey)
  expect((await a.poll()).messages).toEqual([]) // a fresh agent with the same key has an empty inbox
})
