/**
 * Idle-socket attacks, short: sockets that upgrade and never send a frame, from a few loopback
 * addresses, reopened as soon as the relay closes or refuses them, while legitimate clients connect
 * and authenticate. Every legitimate connect must authenticate (the bound is 99 %; none may fail here).
 */
import { afterEach, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { connect, type Socket } from 'node:net'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { startWsRelay, type WsRelay } from '../realtime/helpers.ts'
import { WsProbe, authFrame } from '../support/ws.ts'

let relays: WsRelay[] = []
afterEach(async () => {
  for (const r of relays) await r.t.close()
  relays = []
})

/** Keeps `perAddress` silent sockets open from each of `addresses` until stopped; counts the upgrades. */
function idleSockets(port: number, addresses: string[], perAddress: number) {
  let stopped = false
  const open = new Set<Socket>()
  let upgraded = 0
  const one = (localAddress: string) => {
    if (stopped) return
    const s = connect({ host: '127.0.0.1', port, localAddress })
    open.add(s)
    let got = ''
    s.on('connect', () =>
      s.write(
        `GET /v1/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
      ),
    )
    s.on('data', (d) => {
      if (got.length < 64) got += d.toString('latin1')
      if (got.startsWith('HTTP/1.1 101')) upgraded++, (got = 'x'.repeat(64))
    })
    s.on('error', () => {})
    // closed by the auth window or refused: open another at once
    s.on('close', () => {
      open.delete(s)
      setTimeout(() => one(localAddress), 20)
    })
  }
  for (const a of addresses) for (let i = 0; i < perAddress; i++) one(a)
  return {
    get upgraded() {
      return upgraded
    },
    stop() {
      stopped = true
      for (const s of open) s.destroy()
    },
  }
}

/** `n` legitimate connects (a few keys, reused), each authenticated then closed; returns how many passed. */
async function legitimate(r: WsRelay, n: number) {
  const keys = Array.from({ length: 5 }, () => generateKeyPair())
  let ok = 0
  for (let i = 0; i < n; i++) {
    try {
      const p = await WsProbe.open(r.url)
      p.send(authFrame(r.t, keys[i % keys.length]))
      const res = await p.next('auth_result')
      if (res.status === 'ok') ok++
      p.close()
      await p.waitClosed()
    } catch {
      // refused or cut: counted as failed
    }
  }
  return ok
}

async function attack(idleAddresses: number, perAddress: number) {
  // per-address limits on (the loopback addresses are exempt by default); a short auth window so
  // the attackers' sockets are closed and reopened during the test
  const r = await startWsRelay({ rateLimits: { addressExempt: '', addressPerMin: 0 }, ws: { authTimeoutMs: 1000 } } as never)
  relays.push(r)
  const addrs = Array.from({ length: idleAddresses }, (_, i) => `127.0.4.${i + 1}`)
  const idle = idleSockets(r.port, addrs, perAddress)
  // the attack is under way once each address holds its idle sockets (a loaded machine takes longer)
  const deadline = performance.now() + 10_000
  while (idle.upgraded < idleAddresses * Math.min(perAddress, 4) && performance.now() < deadline) await Bun.sleep(20)
  const ok = await legitimate(r, 60)
  const held = r.t.relay.features.realtime.hub.pendingSockets()
  idle.stop()
  return { ok, upgraded: idle.upgraded, held }
}

test('15 idle unauthenticated sockets from 3 addresses: every legitimate connect authenticates', async () => {
  const { ok, upgraded, held } = await attack(3, 5)
  // each address holds its cap of 4; the fifth is refused and retried
  expect(upgraded).toBeGreaterThanOrEqual(12)
  expect(held).toBeGreaterThanOrEqual(12)
  expect(held).toBeLessThanOrEqual(3 * 4 + 1)
  expect(ok).toBe(60)
}, 20_000)

test('200 idle unauthenticated sockets from 20 addresses: every legitimate connect authenticates', async () => {
  const { ok, upgraded, held } = await attack(20, 10)
  // each address holds its cap of 4 at most: 80 of the 96 places strangers may take
  expect(upgraded).toBeGreaterThanOrEqual(80)
  expect(held).toBeLessThanOrEqual(20 * 4 + 1)
  expect(ok).toBe(60)
}, 20_000)
