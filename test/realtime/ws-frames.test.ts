/** Client frames after auth (docs/protocol.md §8.4): ack, send with every check of POST, ping, and bad frames. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { expectError } from '../support/harness.ts'
import { WsProbe } from '../support/ws.ts'
import { agent, msg, rawSend, unknownKey } from '../messages/helpers.ts'
import { startWsRelay, type WsRelay } from './helpers.ts'

let r: WsRelay
beforeAll(async () => {
  r = await startWsRelay({ rateLimits: { sendPerMin: 0, pollPerMin: 0 } })
})
afterAll(() => r.t.close())

describe('ack', () => {
  test('marks a pushed message delivered; a second ack is a no-op; unknown and foreign ids → message_not_found', async () => {
    const alice = await agent(r.t)
    const bob = r.t.client()
    const p = await WsProbe.authed(r.t, r.url, bob.transport.keys)
    const { message_id } = await alice.send(msg(bob, { body: { n: 1 } }))
    const pushed = await p.next('message')
    expect(pushed.message).toMatchObject({ message_id, status: 'sent', body: { n: 1 } })
    p.send({ type: 'ack', message_id })
    expect(await p.sync()).toEqual([])
    expect((await alice.messageStatus(message_id)).status).toBe('delivered')
    p.send({ type: 'ack', message_id })
    expect(await p.sync()).toEqual([]) // idempotent

    // another pair's message, and an unknown id
    const carol = r.t.client()
    const { message_id: foreign } = await alice.send(msg(carol))
    for (const id of [foreign, 'msg_1795341600_000000000000', 'nonsense']) {
      p.send({ type: 'ack', message_id: id })
      const [err] = await p.sync()
      expect(err).toEqual({ type: 'error', error: { code: 'message_not_found', message: expect.any(String), details: { message_id: id } } })
    }
    expect((await alice.messageStatus(foreign)).status).toBe('sent')
    // the sender cannot ack its own message to someone else
    const ap = await WsProbe.authed(r.t, r.url, alice.transport.keys)
    ap.send({ type: 'ack', message_id: foreign })
    expect((await ap.sync())[0].error.code).toBe('message_not_found')
    p.send({ type: 'ack' })
    expect((await p.sync())[0].error.code).toBe('bad_request')
    p.close()
    ap.close()
  })
})

describe('send', () => {
  test('success: send_result with the client id; the recipient gets it pushed', async () => {
    const alice = r.t.client()
    const bob = r.t.client()
    const ap = await WsProbe.authed(r.t, r.url, alice.transport.keys)
    const bp = await WsProbe.authed(r.t, r.url, bob.transport.keys)
    ap.send({ type: 'send', id: 'c-1', message: { recipient_key: bob.publicKey, body: { hi: true }, thread_id: 't1' } })
    const res = await ap.next('send_result')
    expect(res).toEqual({
      type: 'send_result',
      id: 'c-1',
      message_id: expect.stringMatching(/^msg_\d+_[0-9a-f]{12}$/),
      status: 'sent',
      created_at: new Date(r.t.clock.now()).toISOString(),
      expires_at: new Date(r.t.clock.now() + 604_800_000).toISOString(),
    })
    const pushed = await bp.next('message')
    expect(pushed.message).toMatchObject({ message_id: res.message_id, sender_key: alice.publicKey, body: { hi: true }, thread_id: 't1' })
    expect((await bob.getMessage(res.message_id)).body).toEqual({ hi: true })
    ap.close()
    bp.close()
  })

  test('the flat form {type:"send", id, recipient_key, body, …} (MRP) works like the nested one, numbers kept exact', async () => {
    const alice = r.t.client()
    const bob = r.t.client()
    const ap = await WsProbe.authed(r.t, r.url, alice.transport.keys)
    const bp = await WsProbe.authed(r.t, r.url, bob.transport.keys)
    ap.send(`{"type":"send","id":"flat-1","recipient_key":"${bob.publicKey}","body":{"n":9007199254740993},"thread_id":"t-flat","metadata":{"k":1}}`)
    const res = await ap.next('send_result')
    expect(res).toMatchObject({ type: 'send_result', id: 'flat-1', status: 'sent' })
    const pushed = await bp.next('message')
    expect(pushed.message).toMatchObject({ message_id: res.message_id, thread_id: 't-flat', metadata: { k: 1 }, attachments: [] })
    const raw = await (await bob.transport.send('GET', `/v1/messages/${res.message_id}`)).text()
    expect(raw).toContain('"body":{"n":9007199254740993}')
    expect(raw).not.toContain('"type"')
    // without an id; and a flat frame without a recipient is a bad_request naming recipient_key
    ap.send({ type: 'send', recipient_key: bob.publicKey, body: 'no id' })
    expect(await ap.next('send_result')).toMatchObject({ id: null, status: 'sent' })
    ap.send({ type: 'send', id: 'flat-2', body: 1 })
    const bad = await ap.next('send_result')
    expect(bad.error.code).toBe('bad_request')
    expect(Object.keys(bad.error.details.fields)).toEqual(['recipient_key'])
    ap.close()
    bp.close()
  })

  test('each error code of POST, in a send_result with the id', async () => {
    const alice = await agent(r.t)
    const ap = await WsProbe.authed(r.t, r.url, alice.transport.keys)
    const closed = await agent(r.t, { inbox_policy: 'closed' })
    const suspended = generateKeyPair().publicKey
    await r.t.relay.services.agents.suspend(suspended, null)
    const cases: [unknown, string, number][] = [
      [{ recipient_key: unknownKey(), body: 1, expires_in: 0 }, 'bad_request', 400],
      [{ recipient_key: 'nope', body: 1 }, 'bad_request', 400],
      [undefined, 'bad_request', 400],
      [{ recipient_key: unknownKey(), body: 'x'.repeat(1024 * 1024 + 10) }, 'payload_too_large', 413],
      [{ recipient_key: unknownKey() }, 'unprocessable_entity', 422],
      [{ recipient_key: unknownKey(), attachments: [{ blob_id: 'blob_000000000000000000000000' }] }, 'unprocessable_entity', 422],
      [{ recipient_key: closed.publicKey, body: 1 }, 'acl_denied', 403],
      [{ recipient_key: suspended, body: 1 }, 'forbidden', 403],
    ]
    let n = 0
    for (const [message, code] of cases) {
      const id = ++n
      ap.send({ type: 'send', id, message })
      const res = await ap.next('send_result')
      expect(res).toEqual({ type: 'send_result', id, error: { code, message: expect.any(String), details: res.error.details ?? null } })
      expect([id, Object.keys(res.error)]).toEqual([id, ['code', 'message', 'details']])
    }
    // details name the fields like POST does
    ap.send({ type: 'send', id: 'd', message: { recipient_key: unknownKey(), body: 1, expires_in: 0 } })
    const http = await rawSend(alice, { recipient_key: unknownKey(), body: 1, expires_in: 0 })
    const httpErr = await expectError(http, 400, 'bad_request')
    expect((await ap.next('send_result')).error.details).toEqual(httpErr.details)
    ap.close()
  })

  test('the rate limit is shared with POST /v1/messages (429 with details)', async () => {
    const { t, url } = await startWsRelay({ rateLimits: { sendPerMin: 3, pollPerMin: 0 } })
    try {
      const alice = await agent(t)
      const to = unknownKey()
      const ap = await WsProbe.authed(t, url, alice.transport.keys)
      expect((await rawSend(alice, msg(to))).status).toBe(201)
      for (const id of [1, 2]) {
        ap.send({ type: 'send', id, message: msg(to) })
        expect((await ap.next('send_result')).status).toBe('sent')
      }
      ap.send({ type: 'send', id: 3, message: msg(to) })
      const refused = await ap.next('send_result')
      expect(refused.error).toEqual({ code: 'rate_limit_exceeded', message: expect.any(String), details: { limit: 3, window: '1m', retry_after: 60 } })
      await expectError(await rawSend(alice, msg(to)), 429, 'rate_limit_exceeded')
      t.clock.advance(60_000)
      ap.send({ type: 'send', id: 4, message: msg(to) })
      expect((await ap.next('send_result')).status).toBe('sent')
      ap.close()
    } finally {
      await t.close()
    }
  })
})

describe('other frames', () => {
  test('ping → pong', async () => {
    const p = await WsProbe.authed(r.t, r.url, generateKeyPair())
    p.send({ type: 'ping' })
    expect(await p.next()).toEqual({ type: 'pong' })
    p.close()
  })

  test('malformed JSON, unknown types, binary frames and a second auth get a bad_request error frame; the connection stays', async () => {
    const keys = generateKeyPair()
    const p = await WsProbe.authed(r.t, r.url, keys)
    const bad = ['{"type":', 'null', '42', '"ping"', '{}', '{"type":"subscribe"}', '{"type":7}', new Uint8Array([0x7b, 0x7d])]
    for (const frame of bad) {
      p.send(frame)
      const [err] = await p.sync()
      expect(err).toEqual({ type: 'error', error: { code: 'bad_request', message: expect.any(String), details: null } })
    }
    p.send({ type: 'auth', public_key: keys.publicKey, timestamp: 'x', signature: 'y' })
    expect((await p.sync())[0].error.code).toBe('bad_request')
    expect(p.closed).toBeNull()
    p.close()
  })

  test('a frame over 2 MiB closes the connection with 1009; the relay carries on', async () => {
    const keys = generateKeyPair()
    const p = await WsProbe.authed(r.t, r.url, keys)
    p.send(JSON.stringify({ type: 'send', id: 1, message: { recipient_key: unknownKey(), body: 'x'.repeat(2 * 1024 * 1024) } }))
    expect((await p.waitClosed()).code).toBe(1009)
    const again = await WsProbe.authed(r.t, r.url, keys)
    again.send({ type: 'ping' })
    expect(await again.next()).toEqual({ type: 'pong' })
    // just under the limit is read (and answered: the body alone is over 1 MiB)
    again.send(JSON.stringify({ type: 'send', id: 2, message: { recipient_key: unknownKey(), body: 'x'.repeat(2 * 1024 * 1024 - 200) } }))
    expect((await again.next('send_result')).error.code).toBe('payload_too_large')
    again.close()
  })
})
