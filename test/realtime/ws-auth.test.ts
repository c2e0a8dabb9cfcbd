/** WebSocket authentication (docs/protocol.md §8.1–2, §8.5): every way an auth frame can fail, the window, the limit. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { generateKeyPair, signWsAuth } from '../../src/auth/sign.ts'
import vectors from '../fixtures/test-vectors.json'
import { RFC_KEY_1 } from '../support/harness.ts'
import { WsProbe, authFrame } from '../support/ws.ts'
import { startWsRelay, type WsRelay } from './helpers.ts'

let r: WsRelay
beforeAll(async () => {
  r = await startWsRelay({ ws: { maxConnections: 5, pingIntervalMs: 30_000, authTimeoutMs: 10_000 } })
})
afterAll(() => r.t.close())

async function expectAuthFailure(frame: unknown, code: string) {
  const p = await WsProbe.open(r.url)
  p.send(frame)
  const res = await p.next()
  expect(res).toEqual({ type: 'auth_result', status: 'error', error: { code, message: expect.any(String) } })
  expect((await p.waitClosed()).code).toBe(4001)
}

describe('auth frame', () => {
  test('a valid frame is answered ok with the public key', async () => {
    const keys = generateKeyPair()
    const p = await WsProbe.open(r.url)
    p.send(authFrame(r.t, keys))
    expect(await p.next()).toEqual({ type: 'auth_result', status: 'ok', public_key: keys.publicKey })
    p.close()
  })

  test('the worked example of the test vectors authenticates at its timestamp', async () => {
    const v = vectors.websocket
    const saved = r.t.clock.now()
    r.t.clock.set(Date.parse(v.frame.timestamp))
    try {
      expect(signWsAuth(RFC_KEY_1, v.frame.timestamp)).toEqual(v.frame as any)
      const p = await WsProbe.open(r.url)
      p.send(v.frame)
      expect(await p.next()).toMatchObject({ status: 'ok', public_key: v.public_key })
      p.close()
    } finally {
      r.t.clock.set(saved)
    }
  })

  test('a bad signature: invalid_signature, close 4001', async () => {
    const keys = generateKeyPair()
    const frame = authFrame(r.t, keys)
    const other = authFrame(r.t, generateKeyPair())
    await expectAuthFailure({ ...frame, signature: other.signature }, 'invalid_signature')
  })

  test('a signature over another timestamp: invalid_signature', async () => {
    const keys = generateKeyPair()
    const frame = authFrame(r.t, keys)
    await expectAuthFailure({ ...frame, timestamp: new Date(r.t.clock.now() + 1000).toISOString() }, 'invalid_signature')
  })

  test('a stale timestamp: timestamp_expired', async () => {
    const keys = generateKeyPair()
    await expectAuthFailure(authFrame(r.t, keys, new Date(r.t.clock.now() - 301_000).toISOString()), 'timestamp_expired')
  })

  test('a replayed frame: replay_detected', async () => {
    const keys = generateKeyPair()
    const frame = authFrame(r.t, keys)
    const first = await WsProbe.open(r.url)
    first.send(frame)
    expect((await first.next()).status).toBe('ok')
    await expectAuthFailure(frame, 'replay_detected')
    first.close()
  })

  test('missing or malformed fields: unauthorized', async () => {
    const keys = generateKeyPair()
    const frame = authFrame(r.t, keys)
    await expectAuthFailure({ type: 'auth', public_key: keys.publicKey, timestamp: frame.timestamp }, 'unauthorized')
    await expectAuthFailure({ ...frame, public_key: 'short' }, 'unauthorized')
    await expectAuthFailure({ ...frame, timestamp: 'yesterday' }, 'unauthorized')
    await expectAuthFailure({ ...frame, signature: 42 }, 'unauthorized')
  })

  test('malformed JSON first: unauthorized', async () => {
    await expectAuthFailure('{"type":"auth",', 'unauthorized')
    await expectAuthFailure('[]', 'unauthorized')
  })

  test('any other frame first: unauthorized', async () => {
    await expectAuthFailure({ type: 'ping' }, 'unauthorized')
    await expectAuthFailure({ type: 'ack', message_id: 'msg_1_000000000000' }, 'unauthorized')
  })

  test('a binary frame first: unauthorized', async () => {
    await expectAuthFailure(new Uint8Array([1, 2, 3]), 'unauthorized')
  })

  test('a suspended agent: agent_suspended', async () => {
    const keys = generateKeyPair()
    await r.t.relay.services.agents.suspend(keys.publicKey, 'test')
    await expectAuthFailure(authFrame(r.t, keys), 'agent_suspended')
  })

  test('no auth frame within the window: close 4008', async () => {
    const short = await startWsRelay({ ws: { maxConnections: 5, pingIntervalMs: 30_000, authTimeoutMs: 150 } })
    try {
      const p = await WsProbe.open(short.url)
      const closed = await p.waitClosed()
      expect(closed.code).toBe(4008)
      expect(p.frames).toEqual([])
    } finally {
      await short.t.close()
    }
  })

  test('frames sent right behind the auth frame are handled once it passes', async () => {
    const keys = generateKeyPair()
    const p = await WsProbe.open(r.url)
    p.send(authFrame(r.t, keys))
    p.send({ type: 'ping' })
    expect((await p.next()).status).toBe('ok')
    expect(await p.next()).toEqual({ type: 'pong' })
    p.close()
  })
})

describe('connections per agent', () => {
  test('a 6th connection is refused with rate_limit_exceeded; a slot freed is usable again', async () => {
    const keys = generateKeyPair()
    const open = []
    for (let i = 0; i < 5; i++) open.push(await WsProbe.authed(r.t, r.url, keys))
    const sixth = await WsProbe.open(r.url)
    sixth.send(authFrame(r.t, keys))
    const res = await sixth.next()
    expect(res).toMatchObject({ type: 'auth_result', status: 'error', error: { code: 'rate_limit_exceeded' } })
    expect((await sixth.waitClosed()).code).toBe(4001)
    // other agents are not limited by this one
    ;(await WsProbe.authed(r.t, r.url, generateKeyPair())).close()
    open[0].close()
    await open[0].waitClosed()
    const again = await WsProbe.authed(r.t, r.url, keys)
    expect(r.t.relay.features.realtime.hub.connectionsOf(keys.publicKey)).toHaveLength(5)
    for (const p of [again, ...open.slice(1)]) p.close()
  })

  test('health details count open sockets', async () => {
    const keys = generateKeyPair()
    const p = await WsProbe.authed(r.t, r.url, keys)
    const details = await r.t.relay.health.details()
    expect(details.components.websocket.status).toBe('ok')
    expect(details.components.websocket.authenticated).toBeGreaterThanOrEqual(1)
    expect(details.components.webhooks).toMatchObject({ status: 'ok', queue_depth: 0, in_flight: 0 })
    p.close()
  })
})
