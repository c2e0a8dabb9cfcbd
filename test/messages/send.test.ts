/** POST /v1/messages (docs/protocol.md §4.3): the happy path, the order of the checks, recipients and threads. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { RelayApiError } from '../../src/client/index.ts'
import { startTestRelay, expectError, type TestRelay } from '../support/harness.ts'
import { ISO_MS, MESSAGE_ID, UNLIMITED, agent, msg, rawSend, unknownKey } from './helpers.ts'

let t: TestRelay
beforeAll(async () => {
  t = await startTestRelay(UNLIMITED)
})
afterAll(() => t.close())

describe('accepting a message', () => {
  test('201 with id, status, created_at and expires_at (default 7 days)', async () => {
    const [a, b] = [await agent(t), await agent(t)]
    const res = await rawSend(a, msg(b))
    expect(res.status).toBe(201)
    const out: any = await res.json()
    expect(Object.keys(out).sort()).toEqual(['created_at', 'expires_at', 'message_id', 'status'])
    expect(out.message_id).toMatch(MESSAGE_ID)
    expect(out.message_id.split('_')[1]).toBe(String(Math.floor(t.clock.now() / 1000)))
    expect(out.status).toBe('sent')
    expect(out.created_at).toMatch(ISO_MS)
    expect(out.created_at).toBe(new Date(t.clock.now()).toISOString())
    expect(Date.parse(out.expires_at) - Date.parse(out.created_at)).toBe(604_800_000)
  })

  test('message ids are distinct and random within one second', async () => {
    const [a, b] = [await agent(t), await agent(t)]
    const ids = new Set<string>()
    for (let i = 0; i < 50; i++) ids.add((await a.send(msg(b))).message_id)
    expect(ids.size).toBe(50)
    const randoms = [...ids].map((id) => id.split('_')[2])
    expect(new Set(randoms.map((r) => r[0])).size).toBeGreaterThan(4)
  })

  test('stored exactly as given: content_type verbatim, metadata, thread, expires_in', async () => {
    const [a, b] = [await agent(t), await agent(t)]
    const sent = await a.send(
      msg(b, { content_type: 'Text/Plain; Charset=UTF-8', body: 'plain text', metadata: { k: [1, 2] }, thread_id: 't-1', expires_in: 60 }),
    )
    expect(Date.parse(sent.expires_at) - Date.parse(sent.created_at)).toBe(60_000)
    const m = await b.getMessage(sent.message_id)
    expect(m).toEqual({
      message_id: sent.message_id,
      sender_key: a.publicKey,
      recipient_key: b.publicKey,
      content_type: 'Text/Plain; Charset=UTF-8',
      body: 'plain text',
      attachments: [],
      thread_id: 't-1',
      in_reply_to: null,
      metadata: { k: [1, 2] },
      status: 'delivered',
      created_at: sent.created_at,
      expires_at: sent.expires_at,
      delivered_at: new Date(t.clock.now()).toISOString(),
    })
  })

  test('unset fields come back as MRP documents them (attachments [], thread_id/in_reply_to/metadata null); body of any JSON type round-trips', async () => {
    const [a, b] = [await agent(t), await agent(t)]
    for (const body of [0, false, '', [1, 'x', null], { nested: { deep: [true] } }, 'ünïcødé ✓']) {
      const { message_id } = await a.send({ recipient_key: b.publicKey, body })
      const m = await a.getMessage(message_id)
      expect(m.body).toEqual(body)
      expect(m.content_type).toBe('application/json')
      expect(m.attachments).toEqual([])
      for (const unset of ['thread_id', 'in_reply_to', 'metadata'] as const) expect(m[unset]).toBeNull()
      expect('delivered_at' in m).toBe(false)
    }
  })

  test('self-send is accepted whatever the inbox policy', async () => {
    const a = await agent(t, { inbox_policy: 'closed' })
    const sent = await a.send(msg(a))
    const page = await a.poll()
    expect(page.messages.map((m) => m.message_id)).toEqual([sent.message_id])
    await a.updateProfile({ inbox_policy: 'allowlist' })
    await a.acl.block(a.publicKey)
    expect((await rawSend(a, msg(a))).status).toBe(201)
  })

  test('an unknown recipient is accepted and receives the message once it appears', async () => {
    const a = await agent(t)
    const laterKeys = (await import('../../src/auth/sign.ts')).generateKeyPair()
    const sent = await a.send(msg(laterKeys.publicKey))
    expect((await t.relay.storage.agents.find(laterKeys.publicKey))).toBeNull()
    const later = t.client(laterKeys)
    const page = await later.poll()
    expect(page.messages.map((m) => m.message_id)).toEqual([sent.message_id])
    expect(page.messages[0].status).toBe('delivered')
    expect((await a.messageStatus(sent.message_id)).status).toBe('delivered')
  })

  test('a suspended recipient → 403 forbidden', async () => {
    const a = await agent(t)
    const b = await agent(t, { inbox_policy: 'open' })
    await t.relay.services.agents.suspend(b.publicKey, 'test')
    await expectError(await rawSend(a, msg(b)), 403, 'forbidden')
    const never = unknownKey()
    await t.relay.services.agents.suspend(never, null) // suspending an unknown key creates a suspended record
    await expectError(await rawSend(a, msg(never)), 403, 'forbidden')
  })

  test('the committed message is announced after its commit, once per message', async () => {
    const [a, b] = [await agent(t), await agent(t)]
    const seen: Promise<{ messageId: string; stored: boolean }>[] = []
    let listening = true
    t.relay.signals.onMessage((m, origin) => {
      if (!listening) return
      expect(origin).toBe('local')
      expect(m.recipientKey).toBe(b.publicKey)
      expect(m.senderKey).toBe(a.publicKey)
      // read through the reader connection: only committed rows are visible there
      seen.push(t.relay.features.messages.messages.findRow(m.messageId).then((row) => ({ messageId: m.messageId, stored: !!row })))
    })
    const sent = await a.send(msg(b))
    await rawSend(a, { recipient_key: b.publicKey }) // 422: no event
    listening = false
    expect(await Promise.all(seen)).toEqual([{ messageId: sent.message_id, stored: true }])
  })

  test('the service does not depend on HTTP (the WebSocket path calls it directly)', async () => {
    const [a, b] = [await agent(t), await agent(t)]
    const sender = (await t.relay.storage.agents.find(a.publicKey))!
    const out = await t.relay.features.messages.messages.send(sender, msg(b))
    expect(out.status).toBe('sent')
    expect((await b.poll()).messages.map((m) => m.message_id)).toEqual([out.message_id])
    await expect(t.relay.features.messages.messages.send(sender, { recipient_key: b.publicKey })).rejects.toMatchObject({ code: 'unprocessable_entity' })
  })
})

describe('a request body that is not an object', () => {
  test('null, an array, a string: 400 that says what a send looks like and what was given', async () => {
    const a = await agent(t)
    for (const [raw, kind] of [['null', 'null or an empty body'], ['', 'null or an empty body'], ['[]', 'an array'], ['"hello"', 'a string']]) {
      const res = await a.transport.send('POST', '/v1/messages', raw, { 'content-type': 'application/json' })
      const err = await expectError(res, 400, 'bad_request')
      expect(err.message).toBe('The request body must be a JSON object: {"recipient_key": "…", "body": …} with a body, attachments or both')
      expect(err.details).toEqual({ fields: { body: `must be a JSON object, not ${kind}` } })
    }
  })
})

describe('thread inheritance from in_reply_to', () => {
  test('a reply without thread_id joins the thread of a message the sender can read', async () => {
    const [a, b] = [await agent(t), await agent(t)]
    const first = await a.send(msg(b, { thread_id: 'topic-7' }))
    const reply = await b.send(msg(a, { in_reply_to: first.message_id }))
    const m = await a.getMessage(reply.message_id)
    expect(m.thread_id).toBe('topic-7')
    expect(m.in_reply_to).toBe(first.message_id)
    // an explicit thread_id wins
    const other = await b.send(msg(a, { in_reply_to: first.message_id, thread_id: 'elsewhere' }))
    expect((await a.getMessage(other.message_id)).thread_id).toBe('elsewhere')
  })

  test('no inheritance from a message the sender cannot read, or an unknown id (stored as given)', async () => {
    const [a, b, c] = [await agent(t), await agent(t), await agent(t)]
    const private1 = await a.send(msg(b, { thread_id: 'secret' }))
    const probe = await c.send(msg(a, { in_reply_to: private1.message_id }))
    const m = await a.getMessage(probe.message_id)
    expect(m.thread_id).toBeNull()
    expect(m.in_reply_to).toBe(private1.message_id)
    const dangling = await c.send(msg(a, { in_reply_to: 'msg_1_000000000000' }))
    expect((await a.getMessage(dangling.message_id)).in_reply_to).toBe('msg_1_000000000000')
  })
})

describe('the order of the checks (docs/protocol.md §4.3)', () => {
  const big = 'x'.repeat(1024 * 1024 + 1)

  test('413 body size comes before 400 shape', async () => {
    const a = await agent(t)
    await expectError(await rawSend(a, { recipient_key: 'bad', unknown: 1, body: big }), 413, 'payload_too_large')
  })
  test('400 shape comes before 422 no content', async () => {
    const a = await agent(t)
    const e = await expectError(await rawSend(a, { recipient_key: 'bad' }), 400, 'bad_request')
    expect(Object.keys(e.details.fields)).toEqual(['recipient_key'])
  })
  test('422 no content comes before 422 attachments and 429', async () => {
    const limited = await startTestRelay({ rateLimits: { sendPerMin: 1, pollPerMin: 0 } })
    try {
      const a = limited.client()
      const b = unknownKey()
      expect((await rawSend(a, msg(b))).status).toBe(201)
      await expectError(await rawSend(a, { recipient_key: b }), 422, 'unprocessable_entity')
      const e = await expectError(await rawSend(a, { recipient_key: b, attachments: [{ blob_id: 'blob_x' }] }), 422, 'unprocessable_entity')
      expect(e.details.blob_ids).toEqual(['blob_x'])
      await expectError(await rawSend(a, msg(b)), 429, 'rate_limit_exceeded')
    } finally {
      await limited.close()
    }
  })
  test('429 comes before 403 (a refused send still counts)', async () => {
    const limited = await startTestRelay({ rateLimits: { sendPerMin: 2, pollPerMin: 0 } })
    try {
      const a = limited.client()
      const closed = limited.client()
      await closed.updateProfile({ inbox_policy: 'closed' })
      await expectError(await rawSend(a, msg(closed)), 403, 'acl_denied')
      await expectError(await rawSend(a, msg(closed)), 403, 'acl_denied')
      await expectError(await rawSend(a, msg(closed)), 429, 'rate_limit_exceeded')
    } finally {
      await limited.close()
    }
  })
  test('the caller is authenticated before anything about the body is said', async () => {
    const a = await agent(t)
    const req = a.transport.buildRequest('POST', '/v1/messages', { recipient_key: 'bad' })
    req.headers.set('X-M2M-Signature', 'A'.repeat(86))
    await expectError(await t.handle(req), 401, 'invalid_signature')
  })
})

test('client surfaces errors as RelayApiError with code and details', async () => {
  const a = await agent(t)
  const err = await a.send({ recipient_key: unknownKey() } as never).catch((e) => e)
  expect(err).toBeInstanceOf(RelayApiError)
  expect(err.status).toBe(422)
  expect(err.code).toBe('unprocessable_entity')
})
