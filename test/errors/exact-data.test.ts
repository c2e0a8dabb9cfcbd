/**
 * Nothing changes silently: a message's `body` and `metadata` come back byte for byte as sent — by
 * id, in polls and thread listings, in WebSocket pushes (backlog and live), in webhook payloads (whose
 * HMAC covers those bytes) — whether sent over HTTP or a WebSocket `send` frame. Numbers JSON.parse
 * would change (2^53 + 1, 1e309, -0, 1.0, 1E2), escapes, lone surrogate escapes and spacing included.
 * Profile metadata and capabilities keep every number's digits.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createHmac, randomBytes } from 'node:crypto'
import { startTestRelay, type TestRelay } from '../support/harness.ts'
import { until } from '../support/ws.ts'
import { authFrame } from '../support/ws.ts'
import { WebhookReceiver } from '../support/webhook-receiver.ts'
import { agent } from '../messages/helpers.ts'
import type { RelayClient } from '../../src/client/index.ts'

const BODY = '{"big":9007199254740993, "inf":1e309,"negz":-0,"one":1.0,"exp":1E2,"s":"lone \\ud800 and \\u00e9 \\/","nested":[ 1 , {"x" : 2.50} ]}'
const METADATA = '{ "n" : 12345678901234567890, "\\udc00key":-0.0 }'

let t: TestRelay
let url = ''
let rx: WebhookReceiver
let alice: RelayClient
let bob: RelayClient
const secret = randomBytes(32).toString('base64url')

beforeAll(async () => {
  t = await startTestRelay({ rateLimits: { sendPerMin: 0, pollPerMin: 0, requestsPerMin: 0 }, webhooks: { allowPrivateTargets: true } })
  ;({ url } = await t.relay.start())
  rx = WebhookReceiver.start()
  alice = await agent(t)
  bob = await agent(t)
})
afterAll(async () => {
  rx.stop()
  await t.close()
})

/** The exact text of `"name":<value>` as it must appear in every serialization. */
const member = (name: string, text: string) => `"${name}":${text}`

/** A raw WebSocket on the relay that records frames as text, never parsing them. */
async function rawSocket(keys: RelayClient['transport']['keys']) {
  const texts: string[] = []
  const ws = new WebSocket(url.replace('http', 'ws') + '/v1/ws')
  ws.onmessage = (e) => texts.push(String(e.data))
  await new Promise<void>((resolve, reject) => {
    ws.onopen = () => resolve()
    ws.onerror = () => reject(new Error('cannot connect'))
  })
  ws.send(JSON.stringify(authFrame(t, keys)))
  await until(() => texts.some((x) => x.includes('"auth_result"')), 3000, 'auth_result')
  return { ws, texts }
}

describe('a message sent over HTTP', () => {
  let id = ''
  beforeAll(async () => {
    await bob.setWebhook(rx.url, secret)
    const raw = `{"recipient_key":"${bob.publicKey}","thread_id":"exact","body":${BODY},"metadata":${METADATA}}`
    const res = await alice.transport.send('POST', '/v1/messages', raw)
    expect(res.status).toBe(201)
    id = ((await res.json()) as any).message_id
  })

  test('is read back by id with body and metadata exactly as sent', async () => {
    const text = await (await alice.transport.send('GET', `/v1/messages/${id}`)).text()
    expect(text).toContain(member('body', BODY))
    expect(text).toContain(member('metadata', METADATA))
    expect(JSON.parse(text).message_id).toBe(id)
  })

  test('in the thread listing and in a poll', async () => {
    const thread = await (await alice.transport.send('GET', '/v1/messages/threads/exact')).text()
    expect(thread).toContain(member('body', BODY))
    // the webhook has delivered it by now
    await t.relay.features.webhooks.dispatcher.whenIdle()
    const poll = await (await bob.transport.send('GET', '/v1/messages?status=delivered')).text()
    expect(poll).toContain(member('body', BODY))
    expect(poll).toContain(member('metadata', METADATA))
    expect(JSON.parse(poll).messages).toHaveLength(1)
  })

  test('in the webhook payload, whose HMAC covers exactly those bytes', async () => {
    await t.relay.features.webhooks.dispatcher.whenIdle()
    const got = await until(() => rx.received.find((r) => r.raw.includes(id)), 3000, 'the delivery')
    expect(got.raw).toContain(member('body', BODY))
    expect(got.raw).toContain(member('metadata', METADATA))
    const hmac = createHmac('sha256', Buffer.from(secret, 'base64url')).update(got.raw).digest('hex')
    expect(got.headers['x-m2m-webhook-signature']).toBe(hmac)
  })

  test('in WebSocket pushes: the backlog on connect and each live message', async () => {
    const carol = await agent(t)
    const raw = `{"recipient_key":"${carol.publicKey}","body":${BODY},"metadata":${METADATA}}`
    expect((await alice.transport.send('POST', '/v1/messages', raw)).status).toBe(201)
    const { ws, texts } = await rawSocket(carol.transport.keys)
    try {
      const backlog = await until(() => texts.find((x) => x.startsWith('{"type":"message"')), 3000, 'the backlog push')
      expect(backlog).toContain(member('body', BODY))
      expect(backlog).toContain(member('metadata', METADATA))
      expect((await alice.transport.send('POST', '/v1/messages', raw.replace(BODY, '[-0,1.0]'))).status).toBe(201)
      const live = await until(() => texts.find((x) => x.includes('[-0,1.0]')), 3000, 'the live push')
      expect(live).toContain(member('body', '[-0,1.0]'))
    } finally {
      ws.close()
    }
  })
})

describe('a message sent in a WebSocket send frame', () => {
  test('keeps its body and metadata text too', async () => {
    const dave = await agent(t)
    const { ws, texts } = await rawSocket(alice.transport.keys)
    try {
      ws.send(`{"type":"send","id":"x1","message":{"recipient_key":"${dave.publicKey}","body" : ${BODY} ,"metadata":${METADATA}}}`)
      const result = await until(() => texts.find((x) => x.includes('"send_result"')), 3000, 'send_result')
      expect(JSON.parse(result).status).toBe('sent')
    } finally {
      ws.close()
    }
    const poll = await (await dave.transport.send('GET', '/v1/messages')).text()
    expect(poll).toContain(member('body', BODY))
    expect(poll).toContain(member('metadata', METADATA))
  })
})

describe('profiles keep every number as written', () => {
  test('metadata and a capability input_schema', async () => {
    const erin = await agent(t)
    const patch =
      '{"visibility":"public","metadata":{"id":9007199254740993,"ratio":1.0,"zero":-0},' +
      '"capabilities":[{"name":"calc","tags":["Exact-Num"],"input_schema":{"type":"integer","maximum":18446744073709551615,"multipleOf":1E2}}]}'
    expect((await erin.transport.send('PATCH', '/v1/agents/me', patch)).status).toBe(200)
    const profile = await (await erin.transport.send('GET', `/v1/agents/${erin.publicKey}`)).text()
    expect(profile).toContain('"metadata":{"id":9007199254740993,"ratio":1.0,"zero":-0}')
    expect(profile).toContain('"maximum":18446744073709551615,"multipleOf":1E2')
    const caps = await (await erin.transport.send('GET', `/v1/agents/${erin.publicKey}/capabilities`)).text()
    expect(caps).toContain('"maximum":18446744073709551615')
    const found = await (await erin.transport.send('GET', '/v1/discover?tag=exact-num')).text()
    expect(found).toContain('"maximum":18446744073709551615,"multipleOf":1E2')
  })
})
