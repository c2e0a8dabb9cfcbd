/**
 * WebSockets before authentication: the first frame may be at most 4 KiB, and each socket that has not
 * authenticated counts as one unfinished 2 MiB frame (what the runtime may buffer for it unseen) against
 * the pre-auth memory budgets, from its upgrade until it authenticates or closes.
 */
import { afterEach, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { MAX_FRAME_BYTES } from '../../src/delivery/ws-hub.ts'
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
async function handshake(port: number, localAddress = '127.0.0.1') {
  const c = await RawConnection.open(port, localAddress)
  await c.write(
    `GET /v1/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
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
  expect(r.t.relay.preauth.heldBytes).toBe(MAX_FRAME_BYTES)
  p.ws.send(JSON.stringify({ type: 'auth', public_key: 'x'.repeat(5000), timestamp: 't', signature: 's' }))
  expect((await p.waitClosed()).code).toBe(4001)
  expect(p.frames.some((f: any) => f.type === 'auth_result' && f.status === 'error' && /4096 bytes/.test(f.error.message))).toBe(true)
  await until(() => r.t.relay.preauth.heldBytes === 0, 3000, 'budget released')
})

test('unauthenticated sockets count against the per-address and global budgets; authenticating releases', async () => {
  // sockets may hold half of the global budget: three unfinished frames here
  const r = await start({ preauth: { memoryPerAddressBytes: 2 * MAX_FRAME_BYTES, memoryBytes: 6 * MAX_FRAME_BYTES } })
  const a = await probe(r.url)
  await probe(r.url)
  const perAddress = await handshake(r.port)
  expect(perAddress.status).toBe(429)
  expect(perAddress.answer?.json.error.code).toBe('rate_limit_exceeded')
  expect(Number(perAddress.answer?.headers['retry-after'])).toBeGreaterThan(0)

  perAddress.connection.destroy()

  // another address fits once, then the sockets' half of the relay's budget is full
  const other = await handshake(r.port, '127.0.0.2')
  expect(other.status).toBe(101)
  const full = await handshake(r.port, '127.0.0.3')
  expect(full.status).toBe(503)
  expect(full.answer?.json.error.code).toBe('service_unavailable')
  expect(Number(full.answer?.headers['retry-after'])).toBeGreaterThan(0)
  // while request bodies still have the other half (strangers' bodies all of it but the known keys' reserve)
  const body = r.t.relay.preauth.open('127.0.0.4', 'body')
  body.take(1.5 * MAX_FRAME_BYTES)
  body.release()
  other.connection.destroy()
  await until(() => r.t.relay.preauth.heldBy('127.0.0.2', 'socket') === 0, 3000, 'closed socket released')

  a.send(authFrame(r.t, generateKeyPair()))
  expect((await a.next('auth_result')).status).toBe('ok')
  // the authenticated socket no longer counts: its address has room for one more
  await until(() => r.t.relay.preauth.heldBy('127.0.0.1', 'socket') === MAX_FRAME_BYTES, 3000, 'released on auth')
  const again = await handshake(r.port)
  expect(again.status).toBe(101)
  again.connection.destroy()
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
  expect(r.t.relay.preauth.heldBytes).toBe(MAX_FRAME_BYTES)
  q.close()
  await until(() => r.t.relay.preauth.heldBytes === 0, 3000, 'released on close')
})

test("an address's unauthenticated sockets do not take its share for request bodies", async () => {
  const r = await start({ preauth: { memoryPerAddressBytes: 2 * MAX_FRAME_BYTES } })
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
