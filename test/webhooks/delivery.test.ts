/**
 * Webhook deliveries against a real HTTP receiver on 127.0.0.1 (docs/protocol.md §9): body and headers, the HMAC as
 * a receiver checks it, retries with one delivery id, every kind of failure, dropping and disabling,
 * restarts, cancellation, expiry, and the target check after DNS resolution.
 */
import { afterEach, describe, expect, test } from 'bun:test'
import { createHmac, randomBytes } from 'node:crypto'
import { verifyWebhook } from '../../src/client/index.ts'
import type { ConfigOverrides } from '../../src/config/config.ts'
import { startTestRelay, type TestRelay } from '../support/harness.ts'
import { WebhookReceiver } from '../support/webhook-receiver.ts'
import { agent, msg } from '../messages/helpers.ts'

let t: TestRelay | undefined
let rx: WebhookReceiver | undefined
afterEach(async () => {
  await t?.close()
  rx?.stop()
  t = rx = undefined
})

const SHORT = { allowPrivateTargets: true, retryDelaysMs: [50, 50], timeoutMs: 150, disableAfter: 3, concurrency: 8 }

async function setup(webhooks: Partial<ConfigOverrides['webhooks']> = {}) {
  t = await startTestRelay({ rateLimits: { sendPerMin: 0, pollPerMin: 0 }, webhooks: { ...SHORT, ...webhooks } })
  rx = WebhookReceiver.start()
  const alice = await agent(t)
  const bob = await agent(t)
  const secret = randomBytes(32).toString('base64url')
  const dispatcher = t.relay.features.webhooks.dispatcher
  return { t, rx, alice, bob, secret, dispatcher }
}

/** Moves the fake clock past the next retry and runs the dispatcher, as the periodic job would. */
async function nextRound(t: TestRelay, ms = 60) {
  t.clock.advance(ms)
  await t.relay.features.webhooks.dispatcher.runOnce(t.clock.now())
}

const deliveries = (t: TestRelay) => t.sql<{ delivery_id: string; attempts: number; last_error: string | null; state: string }>('SELECT * FROM webhook_deliveries')

describe('a delivery', () => {
  test('body, headers and HMAC exactly as docs/protocol.md §9; the message becomes delivered', async () => {
    const { t, rx, alice, bob, secret, dispatcher } = await setup()
    await bob.setWebhook(rx.url, secret)
    const sent = await alice.send(msg(bob, { body: { text: 'hello' }, thread_id: 'th-1', metadata: { k: 'v' } }))
    await dispatcher.whenIdle()
    expect(rx.received).toHaveLength(1)
    const req = rx.received[0]
    expect(req.path).toBe('/hook')
    expect(req.headers['content-type']).toBe('application/json')
    expect(req.headers['x-m2m-delivery-id']).toMatch(/^dlv_[0-9a-f]{24}$/)
    expect(req.headers['x-m2m-webhook-timestamp']).toBe(new Date(t.clock.now()).toISOString())
    // the receiver's check: hex HMAC-SHA256 of the raw bytes, keyed with the 32 decoded secret bytes
    const expected = createHmac('sha256', Buffer.from(secret, 'base64url')).update(req.raw).digest('hex')
    expect(req.headers['x-m2m-webhook-signature']).toBe(expected)
    expect(req.json).toEqual({
      delivery_id: req.headers['x-m2m-delivery-id'],
      message: {
        message_id: sent.message_id,
        sender_key: alice.publicKey,
        recipient_key: bob.publicKey,
        content_type: 'application/json',
        body: { text: 'hello' },
        attachments: [],
        thread_id: 'th-1',
        in_reply_to: null,
        metadata: { k: 'v' },
        created_at: sent.created_at,
        expires_at: sent.expires_at,
      },
    })
    expect(Object.keys(req.json.message)).toEqual(['message_id', 'sender_key', 'recipient_key', 'content_type', 'body', 'attachments', 'thread_id', 'in_reply_to', 'metadata', 'created_at', 'expires_at'])
    // the client library's helper accepts it, and refuses a tampered body or an old timestamp
    const delivery = await verifyWebhook({ rawBody: req.raw, headers: req.headers, secret, now: t.clock.now() })
    expect(delivery.message.message_id).toBe(sent.message_id)
    await expect(verifyWebhook({ rawBody: req.raw.replace('hello', 'hellO'), headers: req.headers, secret, now: t.clock.now() })).rejects.toMatchObject({ reason: 'bad_signature' })
    await expect(verifyWebhook({ rawBody: req.raw, headers: req.headers, secret, now: t.clock.now() + 301_000 })).rejects.toMatchObject({ reason: 'stale' })

    expect((await alice.messageStatus(sent.message_id)).status).toBe('delivered')
    expect((await deliveries(t))).toEqual([])
    expect(await bob.getWebhook()).toMatchObject({ enabled: true, consecutive_failures: 0 })
  })

  test('no webhook, or a message to someone else: nothing is queued', async () => {
    const { t, rx, alice, bob, secret, dispatcher } = await setup()
    await alice.send(msg(bob))
    await bob.setWebhook(rx.url, secret)
    await bob.send(msg(alice))
    await dispatcher.whenIdle()
    expect(rx.received).toHaveLength(0)
    expect((await deliveries(t))).toEqual([])
  })
})

describe('retries', () => {
  test('one delivery id and one body on every attempt; success after a failure', async () => {
    const { t, rx, alice, bob, secret, dispatcher } = await setup()
    await bob.setWebhook(rx.url, secret)
    rx.answer(500, 503)
    const sent = await alice.send(msg(bob))
    await dispatcher.whenIdle()
    expect(rx.received).toHaveLength(1)
    expect((await deliveries(t))).toMatchObject([{ attempts: 1, last_error: 'HTTP 500', state: 'pending' }])
    await dispatcher.runOnce(t.clock.now()) // not due yet
    expect(rx.received).toHaveLength(1)
    await nextRound(t)
    await nextRound(t)
    expect(rx.received).toHaveLength(3)
    const ids = rx.received.map((r) => r.headers['x-m2m-delivery-id'])
    expect(new Set(ids).size).toBe(1)
    expect(new Set(rx.received.map((r) => r.raw)).size).toBe(1)
    expect(new Set(rx.received.map((r) => r.headers['x-m2m-webhook-timestamp'])).size).toBe(3)
    expect((await alice.messageStatus(sent.message_id)).status).toBe('delivered')
    expect((await deliveries(t))).toEqual([])
  })

  test('retry delays carry ±10 % jitter', async () => {
    const { t, rx, alice, bob, secret, dispatcher } = await setup({ retryDelaysMs: [10_000] })
    await bob.setWebhook(rx.url, secret)
    rx.setFallback(500)
    for (let i = 0; i < 20; i++) await alice.send(msg(bob))
    await dispatcher.whenIdle()
    const now = t.clock.now()
    const due = (await t.sql<{ next_attempt_at: number }>('SELECT next_attempt_at FROM webhook_deliveries')).map((r) => r.next_attempt_at - now)
    expect(due).toHaveLength(20)
    for (const d of due) expect(d >= 9000 && d <= 11_000).toBe(true)
    expect(new Set(due).size).toBeGreaterThan(1)
  })

  const kinds: [string, (rx: WebhookReceiver) => string, string, number?][] = [
    ['a non-2xx answer', (rx) => (rx.setFallback(500), rx.url), 'http_error'],
    ['no answer within the timeout', (rx) => (rx.setFallback('hang'), rx.url), 'timeout', 60],
    ['a refused connection', () => `http://127.0.0.1:${closedPort()}/hook`, 'network_error'],
    ['a redirect (not followed)', (rx) => (rx.setFallback({ redirect: '/elsewhere' }), rx.url), 'http_error'],
  ]
  for (const [name, target, outcome, timeoutMs] of kinds) {
    test(`fails on ${name}: every attempt made, then the message is dropped and stays sent`, async () => {
      const { t, rx, alice, bob, secret, dispatcher } = await setup(timeoutMs ? { timeoutMs } : {})
      await bob.setWebhook(target(rx), secret)
      const sent = await alice.send(msg(bob))
      await dispatcher.whenIdle()
      await nextRound(t)
      expect((await deliveries(t))).toMatchObject([{ attempts: 2 }])
      await nextRound(t)
      expect((await deliveries(t))).toEqual([])
      const counter = t.relay.ctx.metrics.expose()
      expect(counter).toContain(`relay_webhook_attempts_total{outcome="${outcome}"} 3`)
      if (outcome !== 'network_error') expect(rx.received.map((r) => r.path)).toEqual(['/hook', '/hook', '/hook'])
      expect((await alice.messageStatus(sent.message_id)).status).toBe('sent')
      expect(await bob.getWebhook()).toMatchObject({ enabled: true, consecutive_failures: 1 })
      // still pollable
      expect((await bob.poll()).messages.map((m) => m.message_id)).toEqual([sent.message_id])
    })
  }

  test('three failed messages in a row disable the webhook; PUT re-enables it', async () => {
    const { t, rx, alice, bob, secret, dispatcher } = await setup({ retryDelaysMs: [] as number[] })
    await bob.setWebhook(rx.url, secret)
    rx.setFallback(500)
    for (let i = 0; i < 2; i++) {
      await alice.send(msg(bob))
      await dispatcher.whenIdle()
    }
    expect(await bob.getWebhook()).toMatchObject({ enabled: true, consecutive_failures: 2 })
    // a success in between resets the count
    rx.answer(204)
    await alice.send(msg(bob))
    await dispatcher.whenIdle()
    expect(await bob.getWebhook()).toMatchObject({ enabled: true, consecutive_failures: 0 })
    for (let i = 0; i < 3; i++) {
      await alice.send(msg(bob))
      await dispatcher.whenIdle()
    }
    expect(await bob.getWebhook()).toMatchObject({ enabled: false, consecutive_failures: 3 })
    const before = rx.received.length
    await alice.send(msg(bob))
    await dispatcher.whenIdle()
    await nextRound(t, 60_000)
    expect(rx.received.length).toBe(before)
    expect((await deliveries(t))).toEqual([])

    await bob.setWebhook(rx.url, secret)
    rx.setFallback(204)
    const later = await alice.send(msg(bob))
    await dispatcher.whenIdle()
    expect(rx.received.at(-1)!.json.message.message_id).toBe(later.message_id)
    expect(await bob.getWebhook()).toMatchObject({ enabled: true, consecutive_failures: 0 })
  })
})

describe('durability', () => {
  test('a restart in the middle of the retries keeps the delivery and its id', async () => {
    const { t, rx, alice, bob, secret } = await setup()
    await bob.setWebhook(rx.url, secret)
    rx.answer(500)
    const sent = await alice.send(msg(bob))
    await t.relay.features.webhooks.dispatcher.whenIdle()
    const [pending] = (await deliveries(t))
    expect(pending.attempts).toBe(1)
    await t.restart()
    await nextRound(t)
    expect(rx.received).toHaveLength(2)
    expect(rx.received[1].headers['x-m2m-delivery-id']).toBe(pending.delivery_id)
    expect((await alice.messageStatus(sent.message_id)).status).toBe('delivered')
  })

  test('an attempt in flight at a stop is left pending and made again after the restart', async () => {
    const { t, rx, alice, bob, secret } = await setup({ timeoutMs: 10_000 })
    await bob.setWebhook(rx.url, secret)
    rx.answer('hang')
    await alice.send(msg(bob))
    const deadline = Date.now() + 3000
    while (rx.received.length === 0 && Date.now() < deadline) await Bun.sleep(5)
    expect(rx.received).toHaveLength(1)
    await t.relay.features.webhooks.dispatcher.stop(0) // what a stop does once its grace is over
    await t.restart()
    expect((await deliveries(t))).toMatchObject([{ attempts: 0, state: 'pending' }])
    await t.relay.features.webhooks.dispatcher.runOnce(t.clock.now())
    expect(rx.received).toHaveLength(2)
    expect(rx.received[1].headers['x-m2m-delivery-id']).toBe(rx.received[0].headers['x-m2m-delivery-id'])
    rx.release()
  })

  test('DELETE of the webhook cancels its pending deliveries', async () => {
    const { t, rx, alice, bob, secret, dispatcher } = await setup()
    await bob.setWebhook(rx.url, secret)
    rx.answer(500)
    await alice.send(msg(bob))
    await dispatcher.whenIdle()
    expect((await deliveries(t))).toHaveLength(1)
    await bob.deleteWebhook()
    expect((await deliveries(t))).toEqual([])
    await nextRound(t)
    expect(rx.received).toHaveLength(1)
  })

  test('an expired message is not delivered', async () => {
    const { t, rx, alice, bob, secret, dispatcher } = await setup()
    await bob.setWebhook(rx.url, secret)
    rx.answer(500)
    const sent = await alice.send(msg(bob, { expires_in: 1 }))
    await dispatcher.whenIdle()
    await nextRound(t, 2000)
    expect(rx.received).toHaveLength(1)
    expect((await deliveries(t))).toEqual([])
    expect((await alice.messageStatus(sent.message_id)).status).toBe('expired')
  })

  test('suspending the agent cancels its pending deliveries (a suspended agent receives nothing)', async () => {
    const { t, rx, alice, bob, secret, dispatcher } = await setup()
    await bob.setWebhook(rx.url, secret)
    rx.answer(500)
    await alice.send(msg(bob))
    await dispatcher.whenIdle()
    expect((await deliveries(t))).toHaveLength(1)
    await t.relay.services.agents.suspend(bob.publicKey, 'abuse')
    expect((await deliveries(t))).toEqual([])
    await nextRound(t)
    expect(rx.received).toHaveLength(1)
  })

  test('deleting the agent removes its webhook and deliveries', async () => {
    const { t, rx, alice, bob, secret, dispatcher } = await setup()
    await bob.setWebhook(rx.url, secret)
    rx.answer(500)
    await alice.send(msg(bob))
    await dispatcher.whenIdle()
    await bob.deleteAgent()
    expect((await deliveries(t))).toEqual([])
    expect(await t.sql('SELECT * FROM webhooks')).toEqual([])
  })
})

describe('fairness', () => {
  test('a receiver that hangs does not hold up the deliveries of other webhooks', async () => {
    // 8 attempts at once, a quarter of them for any one webhook
    const { t, rx, alice, bob, secret, dispatcher } = await setup({ concurrency: 8, timeoutMs: 5000 })
    const slow = WebhookReceiver.start().setFallback('hang')
    try {
      const carol = await agent(t)
      await carol.setWebhook(slow.url, secret)
      await bob.setWebhook(rx.url, secret)
      for (let i = 0; i < 10; i++) await alice.send(msg(carol))
      const sent = []
      for (let i = 0; i < 10; i++) sent.push((await alice.send(msg(bob))).message_id)
      const deadline = Date.now() + 3000
      while (rx.received.length < 10 && Date.now() < deadline) await Bun.sleep(5)
      expect(rx.received.map((r) => r.json.message.message_id).sort()).toEqual([...sent].sort())
      expect(slow.received.length).toBe(2)
      // an attempt is in flight until its outcome is stored, a moment after the receiver answered
      while (dispatcher.inFlightCount > 2 && Date.now() < deadline) await Bun.sleep(5)
      expect(dispatcher.inFlightCount).toBe(2)
    } finally {
      slow.release()
      slow.stop()
    }
  })
})

describe('target policy at delivery', () => {
  test('a name for a loopback address (localhost) fails at delivery, without a request', async () => {
    const { t, rx, alice, bob, secret, dispatcher } = await setup({ allowPrivateTargets: false })
    // registration refuses it now (422); a webhook stored while private targets were allowed is checked again here
    await expect(bob.setWebhook(`http://localhost:${rx.server.port}/hook`, secret)).rejects.toThrow('loopback name')
    await t.relay.storage.webhooks.upsert(bob.publicKey, `http://localhost:${rx.server.port}/hook`, secret, t.clock.now())
    await alice.send(msg(bob))
    await dispatcher.whenIdle()
    expect(rx.received).toHaveLength(0)
    expect((await deliveries(t))).toMatchObject([{ attempts: 1, last_error: expect.stringContaining('loopback') }])
    expect(t.relay.ctx.metrics.expose()).toContain('relay_webhook_attempts_total{outcome="refused"} 1')
  })

  test('a name that resolves to a private address fails after resolution, even when only one of its addresses is private', async () => {
    const { t, rx, alice, bob, secret, dispatcher } = await setup({ allowPrivateTargets: false })
    dispatcher.setResolver(async (host) => (host === 'inside.example' ? [{ address: '127.0.0.1', family: 4 }] : [{ address: '10.0.0.1', family: 4 }, { address: '93.184.216.34', family: 4 }]))
    await bob.setWebhook(`http://inside.example:${rx.server.port}/hook`, secret)
    await alice.send(msg(bob))
    await dispatcher.whenIdle()
    expect(rx.received).toHaveLength(0)
    expect((await deliveries(t))[0].last_error).toContain('resolves to 127.0.0.1')
    // one private address among several is enough to refuse
    const carol = await agent(t)
    await carol.setWebhook('http://mixed.example/hook', secret)
    await alice.send(msg(carol))
    await dispatcher.whenIdle()
    expect((await deliveries(t)).map((d) => d.last_error)).toContainEqual(expect.stringContaining('10.0.0.1'))
  })
})

function closedPort(): number {
  const s = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response() })
  const port = s.port as number
  s.stop(true)
  return port
}
