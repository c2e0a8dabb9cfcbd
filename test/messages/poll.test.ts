/** GET /v1/messages (docs/protocol.md §4.4): filters, paging, cursors, delivery marking and concurrent pollers. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { MessageJson, PollQuery, RelayClient } from '../../src/client/index.ts'
import type { MessagesService } from '../../src/services/messages.ts'
import type { AgentRecord } from '../../src/services/models/records.ts'
import { expectError, startTestRelay, type TestRelay } from '../support/harness.ts'
import { UNLIMITED, agent, msg, rawGet } from './helpers.ts'

let t: TestRelay
let svc: MessagesService
beforeAll(async () => {
  t = await startTestRelay(UNLIMITED)
  svc = t.relay.features.messages.messages
})
afterAll(() => t.close())

const row = async (c: RelayClient): Promise<AgentRecord> => (await t.relay.storage.agents.find(c.publicKey))!

/** Follows next_cursor to the end; checks the paging invariants on the way. */
async function walk(c: RelayClient, query: PollQuery, limit: number): Promise<MessageJson[]> {
  const out: MessageJson[] = []
  let cursor: string | undefined
  for (let pages = 0; pages < 1000; pages++) {
    const page = await c.poll({ ...query, limit, cursor })
    expect(page.messages.length).toBeLessThanOrEqual(limit)
    expect(page.next_cursor === null).toBe(!page.has_more)
    if (page.has_more) expect(page.messages.length).toBe(limit)
    out.push(...page.messages)
    if (!page.has_more) return out
    cursor = page.next_cursor!
  }
  throw new Error('paging did not end')
}

const order = (a: MessageJson, b: MessageJson) =>
  a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : a.message_id < b.message_id ? -1 : 1

interface Seeded {
  recipient: RelayClient
  senders: RelayClient[]
  /** every message, in (created_at, message_id) order */
  all: { id: string; sender: string; inReplyTo?: string; threadId?: string }[]
  anchor: string
}

/**
 * 250 messages to a fresh recipient from three senders, many sharing a millisecond (so the message_id
 * tie-break matters), a third of them replies to one anchor message, a quarter in one thread.
 */
async function seed250(): Promise<Seeded> {
  const recipient = await agent(t)
  const senders = [await agent(t), await agent(t), await agent(t)]
  const anchor = (await svc.send(await row(recipient), msg(senders[0], { thread_id: 'anchor-thread' }))).message_id
  const all: Seeded['all'] = []
  for (let i = 0; i < 250; i++) {
    if (i % 7 === 0) t.clock.advance(1)
    const sender = senders[i % 3]
    const extra: Record<string, string> = {}
    if (i % 3 === 1) extra.in_reply_to = anchor
    if (i % 4 === 0) extra.thread_id = 'thread-A'
    const sent = (await svc.send(await row(sender), msg(recipient, { body: { i }, ...extra })))
    all.push({ id: sent.message_id, sender: sender.publicKey, inReplyTo: extra.in_reply_to, threadId: extra.thread_id })
  }
  // sort like the relay does: created_at then message_id
  const created = new Map<string, number>()
  for (const m of all) created.set(m.id, (await svc.findRow(m.id))!.createdAt)
  all.sort((a, b) => created.get(a.id)! - created.get(b.id)! || (a.id < b.id ? -1 : 1))
  return { recipient, senders, all, anchor }
}

describe('paging across 250 messages: no duplicates, no gaps, oldest first', () => {
  const filters: [string, (s: Seeded) => PollQuery, (s: Seeded, m: Seeded['all'][number]) => boolean][] = [
    ['no filter', () => ({}), () => true],
    ['sender_key', (s) => ({ sender_key: s.senders[1].publicKey }), (s, m) => m.sender === s.senders[1].publicKey],
    ['in_reply_to', (s) => ({ in_reply_to: s.anchor }), (s, m) => m.inReplyTo === s.anchor],
    ['thread_id', () => ({ thread_id: 'thread-A' }), (_s, m) => m.threadId === 'thread-A'],
  ]
  for (const [name, query, keep] of filters) {
    test(`${name}: sent, then delivered, then expired (before and after the sweep)`, async () => {
      const s = await seed250()
      const expected = s.all.filter((m) => keep(s, m)).map((m) => m.id)
      expect(expected.length).toBeGreaterThan(40)

      const sent = await walk(s.recipient, { ...query(s), status: 'sent' }, 7)
      expect(sent.map((m) => m.message_id)).toEqual(expected)
      expect([...sent].sort(order).map((m) => m.message_id)).toEqual(expected)
      for (const m of sent) {
        expect(m.status).toBe('delivered')
        expect(m.delivered_at).toBeDefined()
      }
      expect((await s.recipient.poll({ ...query(s) })).messages).toEqual([]) // all consumed

      const delivered = await walk(s.recipient, { ...query(s), status: 'delivered' }, 9)
      expect(delivered.map((m) => m.message_id)).toEqual(expected)

      // a second recipient's sent messages expire untouched; delivered ones vanish at expiry
      const second = await seed250()
      const expectedExpired = second.all.filter((m) => keep(second, m)).map((m) => m.id)
      t.clock.advance(7 * 86_400_000 + 1000)
      const expired = await walk(second.recipient, { ...query(second), status: 'expired' }, 11)
      expect(expired.map((m) => m.message_id)).toEqual(expectedExpired)
      for (const m of expired) {
        expect(m.status).toBe('expired')
        expect('body' in m).toBe(false)
      }
      expect(await walk(s.recipient, { ...query(s), status: 'delivered' }, 50)).toEqual([])
      await t.relay.scheduler.runNow('expire-messages')
      const afterSweep = await walk(second.recipient, { ...query(second), status: 'expired' }, 100)
      expect(afterSweep.map((m) => m.message_id)).toEqual(expectedExpired)
    })
  }

  test('limit defaults to 50 and is capped at 100', async () => {
    const s = await seed250()
    expect((await s.recipient.poll()).messages.length).toBe(50)
    expect((await s.recipient.poll({ limit: 100 })).messages.length).toBe(100)
    await expectError(await rawGet(s.recipient, '/v1/messages?limit=101'), 400, 'bad_request')
  })
})

describe('cursors', () => {
  test('a message accepted in the same millisecond as the last one returned is not passed over', async () => {
    const [a, b] = [await agent(t), await agent(t)]
    for (let i = 0; i < 4; i++) await svc.send(await row(a), msg(b, { body: i }))
    const first = await b.poll({ limit: 2 })
    expect(first.has_more).toBe(true)
    const last = (await svc.findRow(first.messages[1].message_id))!
    // same created_at, and an id that sorts before the cursor position
    await t.sql(
      `INSERT INTO messages (message_id, sender_key, recipient_key, content_type, body, status, created_at, expires_at)
       VALUES (?, ?, ?, 'application/json', '1', 'sent', ?, ?)`,
      [`msg_${Math.floor(last.createdAt / 1000)}_000000000000`, a.publicKey, b.publicKey, last.createdAt, last.expiresAt],
    )
    const rest = await walk(b, { cursor: first.next_cursor! }, 2)
    expect(rest.map((m) => m.message_id)).toContain(`msg_${Math.floor(last.createdAt / 1000)}_000000000000`)
    expect(rest.length).toBe(3)
  })

  test('cursors are opaque strings; garbage, tampered or foreign cursors → 400', async () => {
    const [a, b] = [await agent(t), await agent(t)]
    for (let i = 0; i < 3; i++) await svc.send(await row(a), msg(b))
    const page = await b.poll({ status: 'sent', limit: 1 })
    expect(page.next_cursor).toMatch(/^[A-Za-z0-9_-]+$/)
    const tampered = page.next_cursor!.slice(0, -2) + (page.next_cursor!.endsWith('A') ? 'BB' : 'AA')
    for (const bad of ['zz', '!!!', 'bm90IGEgY3Vyc29y', tampered, 'A'.repeat(500)]) {
      const e = await expectError(await rawGet(b, `/v1/messages?cursor=${encodeURIComponent(bad)}`), 400, 'bad_request')
      expect(e.details.fields.cursor).toBeTruthy()
    }
    expect((await b.poll({ status: 'delivered', cursor: page.next_cursor! })).messages.length).toBe(0)
  })
})

describe('query parameters', () => {
  test('invalid values → 400 naming each parameter', async () => {
    const a = await agent(t)
    const cases: [string, string[]][] = [
      ['limit=0', ['limit']],
      ['limit=abc', ['limit']],
      ['limit=1.5', ['limit']],
      ['limit=-1', ['limit']],
      ['status=read', ['status']],
      ['status=SENT', ['status']],
      ['sender_key=nope', ['sender_key']],
      ['thread_id=' + 't'.repeat(129), ['thread_id']],
      ['since=2026-01-01', ['since']],
      ['status=sent&status=delivered', ['status']],
      ['limit=0&status=x&bogus=1', ['limit', 'status', 'bogus']],
    ]
    for (const [qs, fields] of cases) {
      const e = await expectError(await rawGet(a, `/v1/messages?${qs}`), 400, 'bad_request')
      expect(Object.keys(e.details.fields).sort()).toEqual([...fields].sort())
    }
  })

  test('an empty value is an absent parameter: status=, cursor=, thread_id=, sender_key=, limit=', async () => {
    const [a, b] = [await agent(t), await agent(t)]
    const sent = await a.send(msg(b))
    const res = await rawGet(b, '/v1/messages?status=&cursor=&thread_id=&in_reply_to=&sender_key=&limit=')
    expect(res.status).toBe(200)
    const page: any = await res.json()
    expect(page.messages.map((m: any) => m.message_id)).toEqual([sent.message_id])
  })

  test('only messages addressed to the caller; own sent messages are not in the inbox', async () => {
    const [a, b] = [await agent(t), await agent(t)]
    await svc.send(await row(a), msg(b))
    expect((await a.poll()).messages).toEqual([])
    expect((await b.poll()).messages.length).toBe(1)
  })

  test('a default poll never returns an expired message, even before the sweep', async () => {
    const [a, b] = [await agent(t), await agent(t)]
    await svc.send(await row(a), msg(b, { expires_in: 10 }))
    t.clock.advance(10_000)
    expect((await b.poll()).messages).toEqual([])
    expect((await b.poll({ status: 'expired' })).messages.length).toBe(1)
  })
})

describe('concurrent polls never share a message', () => {
  test('two clients of one agent firing polls at once split the inbox without overlap', async () => {
    const [a, b] = [await agent(t), await agent(t)]
    const ids = new Set<string>()
    for (let i = 0; i < 180; i++) ids.add((await svc.send(await row(a), msg(b, { body: i }))).message_id)
    const one = t.client(b.transport.keys)
    const two = t.client(b.transport.keys)
    const polls = Array.from({ length: 30 }, (_, i) => (i % 2 ? one : two).poll({ limit: 10 }))
    const pages = await Promise.all(polls)
    const got = pages.flatMap((p) => p.messages.map((m) => m.message_id))
    expect(new Set(got).size).toBe(got.length) // nothing twice
    expect(new Set(got)).toEqual(ids) // nothing lost (30 × 10 ≥ 180)
    expect(pages.filter((p) => p.messages.length > 0).length).toBe(18)
  })

  test('service-level: interleaved polls of the same inbox see disjoint sets', async () => {
    const [a, b] = [await agent(t), await agent(t)]
    for (let i = 0; i < 50; i++) await svc.send(await row(a), msg(b))
    const seen = new Set<string>()
    for (let i = 0; i < 10; i++) {
      for (const m of (await svc.poll(b.publicKey, { limit: '7' })).messages) {
        expect(seen.has(m.message_id)).toBe(false)
        seen.add(m.message_id)
      }
    }
    expect(seen.size).toBe(50)
  })
})
