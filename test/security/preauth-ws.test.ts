/**
 * WebSockets before authentication: the first frame may be at most 4 KiB; each socket that has not
 * authenticated counts as room for that frame against the pre-auth memory budgets (not as a whole
 * frame: a silent socket costs a connection), and by count: per client address, and over all clients
 * with a reserve that only handshakes naming a key known here may use. Under idle-socket attacks from
 * a few addresses, legitimate clients keep connecting and authenticating.
 */
import { afterEach, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { MAX_AUTH_FRAME_BYTES, MAX_FRAME_BYTES } from '../../src/delivery/ws-hub.ts'
import { startWsRelay, type WsRelay } from '../realtime/helpers.ts'
import { WsProbe, authFrame, until } from '../support/ws.ts'
import { RawConnection, head } from './raw-http.ts'

let relays: WsRelay[] = []
let probes: WsProbe[] = []
afterEach(async () => {
  for (const p of probes) p.close()
  probes = []
  for (const r of relays) await r.t.close()
  relays = []
})

async function start(overrides: { rateLimits?: Record<string, unknown>; [k: string]: unknown } = {}) {
  // the loopback addresses these tests come from are exempt from per-address limits by default
  const r = await startWsRelay({ ...overrides, rateLimits: { addressExempt: '', ...overrides.rateLimits } } as never)
  relays.push(r)
  return r
}

async function probe(url: string) {
  const p = await WsProbe.open(url)
  probes.push(p)
  return p
}

/** The answer to a handshake sent over plain TCP (101, or the refusal in the error envelope). */
async function handshake(port: number, localAddress = '127.0.0.1', path = '/v1/ws') {
  const c = await RawConnection.open(port, localAddress)
  await c.write(
    `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
  )
  await until(() => c.rest().includes('\r\n\r\n') || c.closed, 3000, 'handshake answer')
  const status = Number(/^HTTP\/1\.1 (\d+)/.exec(c.rest())?.[1])
  const answer = status === 101 ? null : await c.answer()
  if (status !== 101) c.destroy()
  return { status, answer, connection: c }
}

test('a first frame over 4 KiB fails authentication (auth_result error, 4001) and releases its budget', async () => {
  const r = await start()
  const p = await probe(r.url)
  expect(r.t.relay.preauth.heldBytes).toBe(MAX_AUTH_FRAME_BYTES)
  p.ws.send(JSON.stringify({ type: 'auth', public_key: 'x'.repeat(5000), timestamp: 't', signature: 's' }))
  expect((await p.waitClosed()).code).toBe(4001)
  expect(p.frames.some((f: any) => f.type === 'auth_result' && f.status === 'error' && /4096 bytes/.test(f.error.message))).toBe(true)
  await until(() => r.t.relay.preauth.heldBytes === 0, 3000, 'budget released')
})

test('unauthenticated sockets are capped per address (429) and relay-wide (503); authenticating gives the place back', async () => {
  const r = await start({ ws: { preauthPerAddress: 2, preauthMax: 4 } } as never)
  const hub = r.t.relay.features.realtime.hub
  const a = await probe(r.url)
  await probe(r.url)
  // each holds room for its auth frame, not a whole frame
  expect(r.t.relay.preauth.heldBy('127.0.0.1', 'socket')).toBe(2 * MAX_AUTH_FRAME_BYTES)
  const perAddress = await handshake(r.port)
  expect(perAddress.status).toBe(429)
  expect(perAddress.answer?.json.error.code).toBe('rate_limit_exceeded')
  expect(Number(perAddress.answer?.headers['retry-after'])).toBeGreaterThan(0)
  perAddress.connection.destroy()

  // another address fits once: strangers may hold three of the four places (the last is the reserve)
  const other = await handshake(r.port, '127.0.0.2')
  expect(other.status).toBe(101)
  const full = await handshake(r.port, '127.0.0.3')
  expect(full.status).toBe(503)
  expect(full.answer?.json.error.code).toBe('service_unavailable')
  expect(Number(full.answer?.headers['retry-after'])).toBeGreaterThan(0)
  expect(hub.pendingSockets()).toBe(3)
  other.connection.destroy()
  await until(() => hub.pendingSockets('127.0.0.2') === 0 && r.t.relay.preauth.heldBy('127.0.0.2', 'socket') === 0, 3000, 'closed socket released')

  const keys = generateKeyPair()
  a.send(authFrame(r.t, keys))
  expect((await a.next('auth_result')).status).toBe('ok')
  // the authenticated socket no longer counts: its address has room for one more
  await until(() => hub.pendingSockets('127.0.0.1') === 1, 3000, 'released on auth')
  expect(r.t.relay.preauth.heldBy('127.0.0.1', 'socket')).toBe(MAX_AUTH_FRAME_BYTES)
  const again = await handshake(r.port, '127.0.0.4')
  expect(again.status).toBe(101)
  const third = await handshake(r.port, '127.0.0.7')
  expect(third.status).toBe(101)
  // strangers' share is full; a handshake naming a key that authenticated here uses the reserve
  expect((await handshake(r.port, '127.0.0.5', `/v1/ws?key=${generateKeyPair().publicKey}`)).status).toBe(503)
  const known = await handshake(r.port, '127.0.0.5', `/v1/ws?key=${keys.publicKey}`)
  expect(known.status).toBe(101)
  expect((await handshake(r.port, '127.0.0.6', `/v1/ws?key=${keys.publicKey}`)).status).toBe(503)
  for (const h of [again, third, known]) h.connection.destroy()
})

test('a silent socket costs no frame of memory: many fit in a budget that held ten before', async () => {
  // 20 MiB for sockets held ten unfinished 2 MiB frames; silent sockets now hold 4 KiB each
  const r = await start({ preauth: { memoryBytes: 40 * 1024 * 1024 } })
  const conns = []
  for (let i = 0; i < 40; i++) {
    const h = await handshake(r.port, `127.0.2.${1 + Math.floor(i / 4)}`)
    expect(h.status).toBe(101)
    conns.push(h.connection)
  }
  expect(r.t.relay.preauth.heldBytes).toBe(40 * MAX_AUTH_FRAME_BYTES)
  for (const c of conns) c.destroy()
  await until(() => r.t.relay.preauth.heldBytes === 0, 3000, 'released')
})

test('frames sent while the auth frame is checked are counted too; a socket that closes releases everything', async () => {
  const r = await start()
  const p = await probe(r.url)
  p.send(authFrame(r.t, generateKeyPair()))
  p.send({ type: 'ping' })
  expect((await p.next('auth_result')).status).toBe('ok')
  expect((await p.next('pong')).type).toBe('pong')
  expect(r.t.relay.preauth.heldBytes).toBe(0)
  const q = await probe(r.url)
  expect(r.t.relay.preauth.heldBytes).toBe(MAX_AUTH_FRAME_BYTES)
  q.close()
  await until(() => r.t.relay.preauth.heldBytes === 0, 3000, 'released on close')
})

test("an address's unauthenticated sockets do not take its share for request bodies", async () => {
  const r = await start({ ws: { preauthPerAddress: 2 } } as never)
  await probe(r.url)
  await probe(r.url)
  expect((await handshake(r.port)).status).toBe(429)
  const c = await RawConnection.open(r.port)
  const body = 'x'.repeat(MAX_FRAME_BYTES)
  const forged = {
    'X-M2M-Public-Key': randomBytes(32).toString('base64url'),
    'X-M2M-Timestamp': new Date(r.t.clock.now()).toISOString(),
    'X-M2M-Signature': randomBytes(64).toString('base64url'),
  }
  await c.write(head('POST', '/v1/messages', { ...forged, 'Content-Type': 'application/json', 'Content-Length': body.length }))
  await c.write(body)
  const answer = await c.answer()
  expect(answer.status).toBe(401)
  expect(answer.json.error.code).toBe('invalid_signature')
  c.destroy()
})
