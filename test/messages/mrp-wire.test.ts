/**
 * MRP wire fidelity: each request here is exactly what an MRP client sends, and each answer is checked
 * against the fields MRP documents for it.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { startTestRelay, type TestRelay } from '../support/harness.ts'
import { WebhookReceiver } from '../support/webhook-receiver.ts'
import { WsProbe } from '../support/ws.ts'
import { agent, rawGet, rawSend } from './helpers.ts'

let t: TestRelay
beforeAll(async () => {
  t = await startTestRelay({
    rateLimits: { sendPerMin: 0, pollPerMin: 0, requestsPerMin: 0 },
    webhooks: { allowPrivateTargets: true, retryDelaysMs: [50], timeoutMs: 500, disableAfter: 3, concurrency: 2 },
  })
})
afterAll(() => t.close())

/** The documented received-message shape: attachments always an array, nullable fields present as null. */
function expectMrpMessage(m: any) {
  expect(Array.isArray(m.attachments)).toBe(true)
  for (const k of ['thread_id', 'in_reply_to', 'metadata']) {
    expect(k in m).toBe(true)
    expect(m[k]).toBeNull()
  }
}

describe('a received message carries attachments [] and null for unset fields', () => {
  test('on poll, get, thread listing, WebSocket push and webhook', async () => {
    const [a, b] = [await agent(t), await agent(t)]
    const rx = WebhookReceiver.start()
    try {
      await b.setWebhook(rx.url, randomBytes(32).toString('base64url'))
      const { url } = await t.relay.start()
      const ws = await WsProbe.authed(t, url.replace('http', 'ws') + '/v1/ws', b.transport.keys)
      try {
        const res = await rawSend(a, { recipient_key: b.publicKey, body: { text: 'hi' } })
        expect(res.status).toBe(201)
        const { message_id } = (await res.json()) as any
        const pushed = await ws.next('message')
        expect(pushed.message.message_id).toBe(message_id)
        expectMrpMessage(pushed.message)
        expect(pushed.message.attachments).toEqual([])

        await t.relay.features.webhooks.dispatcher.whenIdle()
        expect(rx.received).toHaveLength(1)
        expectMrpMessage(rx.received[0].json.message)

        const got: any = await (await rawGet(b, `/v1/messages/${message_id}`)).json()
        expectMrpMessage(got)
        const sentView: any = await (await rawGet(a, `/v1/messages/${message_id}`)).json()
        expectMrpMessage(sentView)
      } finally {
        ws.close()
      }
      // a second message, pending, read by poll (no webhook left to deliver it first); a threaded one read
      // by the thread listing
      await b.deleteWebhook()
      const second = await a.send({ recipient_key: b.publicKey, body: 2 })
      const page: any = await (await rawGet(b, '/v1/messages')).json()
      expect(page.messages.map((m: any) => m.message_id)).toEqual([second.message_id])
      expectMrpMessage(page.messages[0])
      await a.send({ recipient_key: b.publicKey, body: 3, thread_id: 'th-wire' })
      const thread: any = await (await rawGet(b, '/v1/messages/threads/th-wire')).json()
      expect(thread.messages).toHaveLength(1)
      expect(thread.messages[0].thread_id).toBe('th-wire')
      expect(thread.messages[0].in_reply_to).toBeNull()
      expect(thread.messages[0].metadata).toBeNull()
      expect(thread.messages[0].attachments).toEqual([])
    } finally {
      rx.stop()
    }
  })
  test('an expired message keeps the same shape (attachments [])', async () => {
    const [a, b] = [await agent(t), await agent(t)]
    const sent = await a.send({ recipient_key: b.publicKey, body: 1, expires_in: 1 })
    t.clock.advance(2000)
    const m: any = await (await rawGet(a, `/v1/messages/${sent.message_id}`)).json()
    expect(m.status).toBe('expired')
    expectMrpMessage(m)
    expect(m.attachments).toEqual([])
  })
})

describe('profiles and discovery entries show display_name: null when unset', () => {
  test('GET /v1/agents/{key}, /v1/agents/me and a discovery entry', async () => {
    const a = await agent(t, { visibility: 'public', capabilities: [{ name: 'wire', tags: ['wire-null'] }] })
    const other = await agent(t)
    for (const path of [`/v1/agents/${a.publicKey}`, '/v1/agents/me']) {
      const p: any = await (await rawGet(path === '/v1/agents/me' ? a : other, path)).json()
      expect('display_name' in p).toBe(true)
      expect(p.display_name).toBeNull()
    }
    const found: any = await (await rawGet(other, '/v1/discover?tag=wire-null')).json()
    expect(found.agents).toHaveLength(1)
    expect(found.agents[0].display_name).toBeNull()
  })
})

describe('attachments given as bare blob ids', () => {
  test('"attachments": ["blob_…"] is accepted and filled in from the blob record', async () => {
    const [a, b] = [await agent(t), await agent(t)]
    const blob = await a.uploadBlob(new TextEncoder().encode('hello blob'), { contentType: 'text/plain' })
    const res = await rawSend(a, { recipient_key: b.publicKey, body: { text: 'see file' }, attachments: [blob.blob_id] })
    expect(res.status).toBe(201)
    const { message_id } = (await res.json()) as any
    const got: any = await (await rawGet(b, `/v1/messages/${message_id}`)).json()
    expect(got.attachments).toEqual([{ blob_id: blob.blob_id, content_type: 'text/plain', size: 10, hash: blob.hash, encrypted: false }])
    // a mix of objects and bare ids; an unknown bare id is refused naming it
    const mixed = await rawSend(a, { recipient_key: b.publicKey, attachments: [{ blob_id: blob.blob_id, filename: 'a.txt' }, blob.blob_id] })
    expect(mixed.status).toBe(201)
    const unknown = await rawSend(a, { recipient_key: b.publicKey, attachments: ['blob_000000000000000000000000'] })
    expect(unknown.status).toBe(422)
    expect(JSON.stringify(((await unknown.json()) as any).error.details)).toContain('blob_000000000000000000000000')
  })
})

describe('query parameters named like prototype members', () => {
  test('__proto__, toString and constructor are unknown parameters (400 naming them), never a 500', async () => {
    const a = await agent(t)
    for (const path of ['/v1/messages', '/v1/messages/threads/x', `/v1/agents/${a.publicKey}/acl`, '/v1/discover', '/v1/capabilities']) {
      for (const name of ['__proto__', 'toString', 'constructor', 'hasOwnProperty']) {
        const res = await rawGet(a, `${path}?${name}=1`)
        expect([path, name, res.status]).toEqual([path, name, 400])
        expect(Object.keys(((await res.json()) as any).error.details.fields)).toEqual([name])
      }
    }
  })
})

/** Each field MRP's reference marks required, with its JSON type ('string|null' where it allows null). */
function expectFields(what: string, value: any, fields: Record<string, string>) {
  const typeOf = (v: unknown) => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v)
  const got = Object.fromEntries(Object.keys(fields).map((k) => [k, k in value ? typeOf(value[k]) : 'absent']))
  const want = Object.fromEntries(Object.entries(fields).map(([k, types]) => [k, types.split('|').includes(got[k]) ? got[k] : types]))
  expect([what, got]).toEqual([what, want])
}
const DATE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/

describe('every other answer carries the fields MRP documents for it', () => {
  test('send, poll page, profile, discovery, ACL entry, webhook, blob', async () => {
    const a = await agent(t, { visibility: 'public', capabilities: [{ name: 'shape', tags: ['wire-shape'] }] })
    const b = await agent(t)
    const sent: any = await (await rawSend(a, { recipient_key: b.publicKey, body: 1 })).json()
    expectFields('send', sent, { message_id: 'string', status: 'string', created_at: 'string', expires_at: 'string' })
    expect([sent.status, sent.created_at, sent.expires_at].map(String)).toEqual(['sent', expect.stringMatching(DATE), expect.stringMatching(DATE)])

    const page: any = await (await rawGet(b, '/v1/messages')).json()
    expectFields('poll page', page, { messages: 'array', has_more: 'boolean', next_cursor: 'string|null' })
    expectFields('message', page.messages[0], {
      message_id: 'string', sender_key: 'string', recipient_key: 'string', content_type: 'string', attachments: 'array',
      status: 'string', created_at: 'string', expires_at: 'string', thread_id: 'string|null', in_reply_to: 'string|null', metadata: 'object|null',
    })

    const profile: any = await (await rawGet(b, `/v1/agents/${a.publicKey}`)).json()
    expectFields('profile', profile, {
      public_key: 'string', status: 'string', visibility: 'string', inbox_policy: 'string', created_at: 'string',
      last_active_at: 'string', metadata: 'object', capabilities: 'array', display_name: 'string|null',
    })
    expectFields('capability', profile.capabilities[0], { name: 'string', tags: 'array' })

    const found: any = await (await rawGet(b, '/v1/discover?tag=wire-shape')).json()
    expectFields('discovery page', found, { agents: 'array', has_more: 'boolean', next_cursor: 'string|null' })
    expectFields('discovery entry', found.agents[0], { public_key: 'string', last_active_at: 'string', capabilities: 'array', display_name: 'string|null' })

    const put: any = await (await a.transport.send('PUT', `/v1/agents/me/acl/${b.publicKey}`, { entry_type: 'allow' })).json()
    const one: any = await (await rawGet(a, `/v1/agents/me/acl/${b.publicKey}`)).json()
    const list: any = await (await rawGet(a, '/v1/agents/me/acl')).json()
    for (const [what, entry] of [['ACL PUT', put], ['ACL GET', one], ['ACL list entry', list[0]]]) {
      expectFields(what, entry, { id: 'number', owner_key: 'string', peer_key: 'string', entry_type: 'string', created_at: 'string' })
      expect(Number.isInteger(entry.id)).toBe(true)
    }

    const hook: any = await (await a.transport.send('PUT', '/v1/agents/me/webhook', { url: 'https://hooks.example.com/in', secret: 'A'.repeat(43) })).json()
    const hookGet: any = await (await rawGet(a, '/v1/agents/me/webhook')).json()
    for (const [what, w] of [['webhook PUT', hook], ['webhook GET', hookGet]]) {
      expectFields(what, w, { url: 'string', enabled: 'boolean', consecutive_failures: 'number', created_at: 'string' })
    }
    await a.deleteWebhook()

    const blob: any = await (await a.transport.send('POST', '/v1/blobs', new Uint8Array([1, 2, 3]), { 'content-type': 'application/octet-stream' })).json()
    expectFields('blob', blob, { blob_id: 'string', hash: 'string', size: 'number', content_type: 'string', created_at: 'string', expires_at: 'string' })
    expect(blob.hash).toMatch(/^[0-9a-f]{64}$/)
  })
})
