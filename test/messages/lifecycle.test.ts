/** docs/protocol.md §4.6, row by row, with the fake clock; and the expiry sweep. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { RelayClient } from '../../src/client/index.ts'
import { MessageSweeper } from '../../src/services/messages-sweep.ts'
import type { MessagesService } from '../../src/services/messages.ts'
import type { Storage, Stores } from '../../src/services/ports.ts'
import { expectError, startTestRelay, type TestRelay } from '../support/harness.ts'
import { UNLIMITED, agent, msg, rawGet } from './helpers.ts'

let t: TestRelay
let svc: MessagesService
beforeAll(async () => {
  t = await startTestRelay(UNLIMITED)
  svc = t.relay.features.messages.messages
})
afterAll(() => t.close())

const DAY = 86_400_000
const stored = (id: string) => svc.findRow(id)
const links = async (id: string) => (await t.sql<{ n: number }>('SELECT count(*) AS n FROM message_blobs WHERE message_id = ?', [id]))[0].n
const linkBlob = (id: string, expiresAt: number) =>
  t.sql('INSERT INTO message_blobs (message_id, blob_id, expires_at) VALUES (?, ?, ?)', [id, 'blob_' + '0'.repeat(24), expiresAt])
const sweep = () => t.relay.scheduler.runNow('expire-messages') as Promise<any>

async function pair(): Promise<[RelayClient, RelayClient]> {
  return [await agent(t), await agent(t)]
}

describe('(new) → sent', () => {
  test('accepted by POST: status sent, expires_at = created_at + expires_in', async () => {
    const [a, b] = await pair()
    const sent = await a.send(msg(b, { expires_in: 90 }))
    expect(sent.status).toBe('sent')
    expect(Date.parse(sent.expires_at)).toBe(Date.parse(sent.created_at) + 90_000)
    expect((await stored(sent.message_id))!.status).toBe('sent')
  })
})

describe('sent → delivered', () => {
  test('when the recipient polls it', async () => {
    const [a, b] = await pair()
    const { message_id } = await a.send(msg(b))
    t.clock.advance(10)
    expect((await b.poll()).messages[0].delivered_at).toBe(new Date(t.clock.now()).toISOString())
    expect(await stored(message_id)).toMatchObject({ status: 'delivered', deliveredAt: t.clock.now() })
  })
  test('when the recipient reads it by id', async () => {
    const [a, b] = await pair()
    const { message_id } = await a.send(msg(b))
    await b.getMessage(message_id)
    expect((await stored(message_id))!.status).toBe('delivered')
  })
  test('when the recipient acks it (WebSocket ack): idempotent; others and unknown ids → 404', async () => {
    const [a, b] = await pair()
    const { message_id } = await a.send(msg(b))
    await expect(svc.ack(a.publicKey, message_id)).rejects.toMatchObject({ code: 'message_not_found' })
    await expect(svc.ack(b.publicKey, 'msg_1_000000000000')).rejects.toMatchObject({ code: 'message_not_found' })
    expect((await stored(message_id))!.status).toBe('sent')
    expect(await svc.ack(b.publicKey, message_id)).toMatchObject({ message_id, status: 'delivered' })
    const at = (await stored(message_id))!.deliveredAt
    t.clock.advance(5)
    expect(await svc.ack(b.publicKey, message_id)).toMatchObject({ message_id, status: 'delivered' })
    expect((await stored(message_id))!.deliveredAt).toBe(at)
  })
  test('when its webhook answers 2xx (markDelivered)', async () => {
    const [a, b] = await pair()
    const one = await a.send(msg(b))
    const two = await a.send(msg(b))
    expect(await t.relay.storage.messages.markDelivered([one.message_id, two.message_id, 'msg_1_000000000000'], t.clock.now())).toBe(2)
    expect(await t.relay.storage.messages.markDelivered([one.message_id], t.clock.now())).toBe(0)
    expect((await stored(two.message_id))!.status).toBe('delivered')
  })
  test('pendingFor lists unexpired sent messages oldest first without changing them', async () => {
    const [a, b] = await pair()
    const ids: string[] = []
    for (let i = 0; i < 5; i++) {
      ids.push((await a.send(msg(b, { expires_in: i === 2 ? 1 : 3600 }))).message_id)
      t.clock.advance(1)
    }
    await b.getMessage(ids[4])
    t.clock.advance(1000) // ids[2] expires
    const pending = await svc.pendingFor(b.publicKey, { limit: 10 })
    expect(pending.map((r) => r.messageId)).toEqual([ids[0], ids[1], ids[3]])
    expect(pending.every((r) => r.status === 'sent')).toBe(true)
    const after = await svc.pendingFor(b.publicKey, { afterCreatedAt: pending[0].createdAt, afterId: pending[0].messageId, limit: 1 })
    expect(after.map((r) => r.messageId)).toEqual([ids[1]])
    expect((await stored(ids[0]))!.status).toBe('sent')
  })
})

describe('sent → expired at expires_at', () => {
  test('expired the instant expires_at passes, before any sweep; body dropped from every view', async () => {
    const [a, b] = await pair()
    const sent = await a.send(msg(b, { expires_in: 60, body: { secret: 1 } }))
    t.clock.advance(59_999)
    expect((await a.messageStatus(sent.message_id)).status).toBe('sent')
    t.clock.advance(1) // now == expires_at
    expect((await a.messageStatus(sent.message_id)).status).toBe('expired')
    const viewed = await a.getMessage(sent.message_id)
    expect(viewed.status).toBe('expired')
    expect('body' in viewed).toBe(false)
    expect((await b.poll()).messages).toEqual([]) // never returned by a default poll
    expect(await svc.pendingFor(b.publicKey, { limit: 10 })).toEqual([]) // never pushed
    const read = await b.getMessage(sent.message_id) // the recipient reading it does not deliver it
    expect(read.status).toBe('expired')
    expect((await svc.ack(b.publicKey, sent.message_id)).status).toBe('expired')
    expect(await t.relay.storage.messages.markDelivered([sent.message_id], t.clock.now())).toBe(0)
    expect((await stored(sent.message_id))!.status).toBe('sent') // storage catches up at the sweep
  })

  test('the sweep stores it as expired with body and attachment links dropped; the envelope stays', async () => {
    const [a, b] = await pair()
    const sent = await a.send(msg(b, { expires_in: 60, thread_id: 'keep', metadata: { m: 1 } }))
    await linkBlob(sent.message_id, Date.parse(sent.expires_at))
    t.clock.advance(60_000)
    const result = await sweep()
    expect(result.expired).toBeGreaterThanOrEqual(1)
    expect(await stored(sent.message_id)).toMatchObject({ status: 'expired', body: null, attachments: null, threadId: 'keep' })
    expect(await links(sent.message_id)).toBe(0)
    const env = await b.getMessage(sent.message_id)
    expect(env).toMatchObject({ status: 'expired', thread_id: 'keep', metadata: { m: 1 } })
    expect('body' in env).toBe(false)
    expect((await b.poll({ status: 'expired' })).messages.map((m) => m.message_id)).toEqual([sent.message_id])
  })
})

describe('delivered → removed at expires_at', () => {
  test('gone for readers the instant it expires; the sweep deletes the row and its blob links', async () => {
    const [a, b] = await pair()
    const sent = await a.send(msg(b, { expires_in: 60 }))
    await linkBlob(sent.message_id, Date.parse(sent.expires_at))
    await b.poll()
    t.clock.advance(59_999)
    expect((await a.messageStatus(sent.message_id)).status).toBe('delivered')
    t.clock.advance(1)
    await expectError(await rawGet(a, `/v1/messages/${sent.message_id}`), 404, 'message_not_found')
    await expectError(await rawGet(b, `/v1/messages/${sent.message_id}/status`), 404, 'message_not_found')
    expect((await b.poll({ status: 'delivered' })).messages).toEqual([])
    expect((await b.poll({ status: 'expired' })).messages).toEqual([])
    expect(await stored(sent.message_id)).not.toBeNull()
    await sweep()
    expect(await stored(sent.message_id)).toBeNull()
    expect(await links(sent.message_id)).toBe(0)
  })
})

describe('expired → removed after the retention (7 days by default)', () => {
  test('readable until expires_at + 7 d, gone at that instant, deleted by the sweep', async () => {
    const [a, b] = await pair()
    const sent = await a.send(msg(b, { expires_in: 1 }))
    t.clock.advance(1000)
    await sweep()
    t.clock.advance(7 * DAY - 1)
    expect((await a.messageStatus(sent.message_id)).status).toBe('expired')
    await sweep()
    expect(await stored(sent.message_id)).not.toBeNull()
    t.clock.advance(1)
    await expectError(await rawGet(a, `/v1/messages/${sent.message_id}/status`), 404, 'message_not_found')
    expect((await b.poll({ status: 'expired' })).messages).toEqual([])
    await sweep()
    expect(await stored(sent.message_id)).toBeNull()
  })

  test('a sent message unswept for longer than expiry + retention goes in one sweep', async () => {
    const [a, b] = await pair()
    const sent = await a.send(msg(b, { expires_in: 1 }))
    t.clock.advance(8 * DAY)
    const r = await sweep()
    expect(r.expired).toBeGreaterThanOrEqual(1)
    expect(r.removed_expired).toBeGreaterThanOrEqual(1)
    expect(await stored(sent.message_id)).toBeNull()
  })

  test('the retention is configurable (RELAY_EXPIRED_RETENTION)', async () => {
    const short = await startTestRelay({ ...UNLIMITED, messages: { expiredRetentionMs: 3_600_000 } })
    try {
      const a = short.client()
      const sent = await a.send(msg(a, { expires_in: 10 }))
      short.clock.advance(10_000 + 3_600_000 - 1)
      expect((await a.messageStatus(sent.message_id)).status).toBe('expired')
      short.clock.advance(1)
      await expectError(await rawGet(a, `/v1/messages/${sent.message_id}/status`), 404, 'message_not_found')
      await short.relay.scheduler.runNow('expire-messages')
      expect(await short.relay.features.messages.messages.findRow(sent.message_id)).toBeNull()
    } finally {
      await short.close()
    }
  })
})

describe('the sweep', () => {
  test('works in bounded batches and yields between them', async () => {
    const [a, b] = await pair()
    const sender = (await t.relay.storage.agents.find(a.publicKey))!
    const sends: Promise<unknown>[] = []
    for (let i = 0; i < 2_350; i++) sends.push(svc.send(sender, msg(b, { expires_in: 5 })))
    for (let i = 0; i < 120; i++) sends.push(svc.send(sender, msg(b, { expires_in: 5, body: 'to deliver' })))
    await Promise.all(sends)
    await b.poll({ limit: 100 }) // delivers 100 of them (oldest first)
    t.clock.advance(5000)
    let pauses = 0
    const sweeper = new MessageSweeper(t.relay.storage, 7 * DAY, {
      maxBatch: 500,
      minBatch: 500,
      pause: async () => {
        pauses++
      },
    })
    const r = await sweeper.runOnce(t.clock.now())
    expect(r.expired).toBe(2_370)
    expect(r.removed_delivered).toBe(100)
    // 2,470 rows expired at the same instant: 4 full batches and a partial one, then the retention step
    expect(r.batches).toBe(5 + 1)
    expect(pauses).toBe(4)
    expect((await b.poll({ status: 'expired', limit: 100 })).messages.length).toBe(100)
    expect(await t.sql(`SELECT count(*) AS n FROM messages WHERE recipient_key = ? AND status = 'sent'`, [b.publicKey])).toEqual([{ n: 0 }])
    // the next run starts from the watermark: nothing left to visit
    const again = await sweeper.runOnce(t.clock.now())
    expect(again).toEqual({ expired: 0, removed_delivered: 0, removed_expired: 0, batches: 1 })
  }, 30_000) // 2,470 sends first: seconds on PostgreSQL

  test('adapts the batch size to keep each batch short', async () => {
    const [a, b] = await pair()
    const sender = (await t.relay.storage.agents.find(a.publicKey))!
    await Promise.all(Array.from({ length: 1_000 }, () => svc.send(sender, msg(b, { expires_in: 5 }))))
    t.clock.advance(5000)
    const sizes: number[] = []
    const storage = t.relay.storage
    // the same storage, with every expiry batch "taking" over 1.5 × the 2 ms target
    const slow: Storage = Object.assign(Object.create(storage), {
      transaction: <T>(fn: (tx: Stores) => Promise<T>) =>
        storage.transaction((tx) => {
          const messages = Object.create(tx.messages) as Stores['messages']
          messages.expireBatch = (after, now, limit) => {
            sizes.push(limit)
            const until = performance.now() + 4
            while (performance.now() < until);
            return tx.messages.expireBatch(after, now, limit)
          }
          return fn({ ...tx, messages })
        }),
    })
    const waits: number[] = []
    const pause = async (lastBatchMs: number) => {
      waits.push(lastBatchMs)
    }
    const sweeper = new MessageSweeper(slow, 7 * DAY, { maxBatch: 400, minBatch: 25, targetBatchMs: 2, pause })
    const r = await sweeper.runOnce(t.clock.now())
    expect(r.expired).toBe(1_000)
    expect(sizes.slice(0, 5)).toEqual([250, 125, 62, 31, 25])
    expect(Math.min(...sizes)).toBe(25)
    // between batches the sweep is told how long the last one held the loop (each took over 4 ms here),
    // and by default waits that long: a backlog gets at most half of the event loop
    expect(waits.length).toBe(sizes.length - 1)
    expect(Math.min(...waits)).toBeGreaterThanOrEqual(4)
  }, 30_000) // 1,000 sends first: seconds on PostgreSQL

  test('the watermark survives a restart; a message expiring behind it (clock stepped back) still goes at retention', async () => {
    const r = await startTestRelay(UNLIMITED)
    try {
      const a = r.client()
      const first = await a.send(msg(a, { expires_in: 10 }))
      r.clock.advance(10_000)
      await r.relay.scheduler.runNow('expire-messages')
      const [mark] = await r.sql<{ value: string }>(`SELECT value FROM relay_state WHERE key = 'messages.sweep_watermark'`)
      expect(Number(mark.value)).toBe(r.clock.now())
      await r.restart()
      const second = await a.send(msg(a, { expires_in: 10 }))
      // a row written as if the clock had been stepped back: it expired before the watermark
      await r.sql(
        `INSERT INTO messages (message_id, sender_key, recipient_key, content_type, body, status, created_at, expires_at)
         VALUES ('msg_1_0000000000ff', ?, ?, 'application/json', '1', 'sent', ?, ?)`,
        [a.publicKey, a.publicKey, r.clock.now() - 60_000, r.clock.now() - 30_000],
      )
      r.clock.advance(10_000)
      const run = (await r.relay.scheduler.runNow('expire-messages')) as any
      expect(run.expired).toBe(1) // only the message that expired since the watermark was visited
      const svc2 = r.relay.features.messages.messages
      expect((await svc2.findRow(second.message_id))!.status).toBe('expired')
      expect((await svc2.findRow('msg_1_0000000000ff'))!.status).toBe('sent') // storage lags, readers do not
      expect((await a.messageStatus('msg_1_0000000000ff')).status).toBe('expired')
      r.clock.advance(7 * DAY)
      await r.relay.scheduler.runNow('expire-messages')
      expect(await svc2.findRow('msg_1_0000000000ff')).toBeNull()
      expect(await svc2.findRow(first.message_id)).toBeNull()
      expect(await svc2.findRow(second.message_id)).toBeNull()
    } finally {
      await r.close()
    }
  })

  test('is registered as a job with RELAY_SWEEP_INTERVAL and reports its runs', async () => {
    const report = t.relay.scheduler.report() as Record<string, any>
    expect(report['expire-messages'].interval_ms).toBe(t.relay.config.sweepIntervalMs)
    expect(report['expire-messages'].runs).toBeGreaterThan(0)
    expect(report['expire-messages'].last_error).toBeNull()
  })

  test('requests are served while a sweep is under way', async () => {
    const [a, b] = await pair()
    const sender = (await t.relay.storage.agents.find(a.publicKey))!
    await Promise.all(Array.from({ length: 3_000 }, () => svc.send(sender, msg(b, { expires_in: 1 }))))
    t.clock.advance(1000)
    const running = sweep()
    const during = await a.messageStatus((await a.send(msg(b))).message_id) // answered before the sweep ends
    expect(during.status).toBe('sent')
    const r = await running
    expect(r.batches).toBeGreaterThan(3)
  }, 30_000) // 3,000 sends first: seconds on PostgreSQL
})
