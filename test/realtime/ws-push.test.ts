/** Pushes (docs/protocol.md §8.3): backlog oldest first, then live after each commit; unacked ones come again. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { WsProbe, until } from '../support/ws.ts'
import { agent, msg } from '../messages/helpers.ts'
import { startWsRelay, type WsRelay } from './helpers.ts'

let r: WsRelay
beforeAll(async () => {
  r = await startWsRelay({ rateLimits: { sendPerMin: 0, pollPerMin: 0 } })
})
afterAll(() => r.t.close())

describe('backlog then live', () => {
  test('waiting messages oldest first, then new ones as they are committed; unacked ones are pushed again', async () => {
    const alice = await agent(r.t)
    const bob = await agent(r.t)
    const ids: string[] = []
    for (let i = 0; i < 3; i++) {
      ids.push((await alice.send(msg(bob, { body: { n: i } }))).message_id)
      r.t.clock.advance(10)
    }
    const p = await WsProbe.authed(r.t, r.url, bob.transport.keys)
    for (let i = 0; i < 3; i++) expect((await p.next('message')).message).toMatchObject({ message_id: ids[i], body: { n: i }, status: 'sent' })
    for (let i = 3; i < 5; i++) {
      r.t.clock.advance(10) // one created_at each, so that the order of the next backlog is fixed
      ids.push((await alice.send(msg(bob, { body: { n: i } }))).message_id)
      const m = (await p.next('message')).message
      expect(m).toMatchObject({ message_id: ids[i], body: { n: i } })
      // the pushed message is what a read returns (one serializer), before any status change
      expect(Object.keys(m)).toEqual(['message_id', 'sender_key', 'recipient_key', 'content_type', 'body', 'attachments', 'thread_id', 'in_reply_to', 'metadata', 'status', 'created_at', 'expires_at'])
    }
    expect(await p.sync()).toEqual([])
    // nothing was acked: all five stay sent and come again on the next connection, in order
    p.close()
    await p.waitClosed()
    for (const id of ids) expect((await alice.messageStatus(id)).status).toBe('sent')
    const again = await WsProbe.authed(r.t, r.url, bob.transport.keys)
    await until(() => again.messages().length === 5)
    expect(again.messages().map((m) => m.message_id)).toEqual(ids)
    again.close()
  })

  test('every connection of the agent gets each message; other agents get nothing', async () => {
    const alice = await agent(r.t)
    const bob = await agent(r.t)
    const [b1, b2, a1] = await Promise.all([
      WsProbe.authed(r.t, r.url, bob.transport.keys),
      WsProbe.authed(r.t, r.url, bob.transport.keys),
      WsProbe.authed(r.t, r.url, alice.transport.keys),
    ])
    const { message_id } = await alice.send(msg(bob))
    expect((await b1.next('message')).message.message_id).toBe(message_id)
    expect((await b2.next('message')).message.message_id).toBe(message_id)
    expect(await a1.sync()).toEqual([])
    for (const p of [b1, b2, a1]) p.close()
  })

  test('expired messages are never pushed; delivered ones are not in the backlog', async () => {
    const alice = await agent(r.t)
    const bob = await agent(r.t)
    await alice.send(msg(bob, { expires_in: 1 }))
    const read = await alice.send(msg(bob))
    await bob.getMessage(read.message_id) // delivered by the read
    const keep = await alice.send(msg(bob, { expires_in: 60 }))
    r.t.clock.advance(2000)
    const p = await WsProbe.authed(r.t, r.url, bob.transport.keys)
    await until(() => p.messages().length === 1)
    expect(await p.sync()).toEqual([])
    expect(p.messages().map((m) => m.message_id)).toEqual([keep.message_id])
    p.close()
  })

  test('a large backlog arrives whole, in order, once', async () => {
    const alice = await agent(r.t)
    const bob = await agent(r.t)
    const ids: string[] = []
    for (let i = 0; i < 250; i++) {
      ids.push((await alice.send(msg(bob, { body: i }))).message_id)
      r.t.clock.advance(1)
    }
    const p = await WsProbe.authed(r.t, r.url, bob.transport.keys)
    await until(() => p.messages().length >= 250)
    expect(await p.sync()).toEqual([])
    expect(p.messages().map((m) => m.message_id)).toEqual(ids)
    p.close()
  })

  test('messages committed while the connection authenticates and syncs are pushed exactly once', async () => {
    const alice = await agent(r.t)
    const bob = await agent(r.t)
    const before = await Promise.all(Array.from({ length: 40 }, (_, i) => alice.send(msg(bob, { body: i }))))
    const connecting = WsProbe.authed(r.t, r.url, bob.transport.keys)
    const during = await Promise.all(Array.from({ length: 60 }, (_, i) => alice.send(msg(bob, { body: 40 + i }))))
    const p = await connecting
    const after = await Promise.all(Array.from({ length: 20 }, (_, i) => alice.send(msg(bob, { body: 100 + i }))))
    const all = [...before, ...during, ...after].map((s) => s.message_id)
    await until(() => p.messages().length >= all.length)
    expect(await p.sync()).toEqual([])
    const got = p.messages().map((m) => m.message_id)
    expect(got.length).toBe(all.length)
    expect(new Set(got)).toEqual(new Set(all))
    p.close()
  })
})
