/**
 * Socket lifecycle (docs/protocol.md §8.5, §2.2, §2.3, §13): slow consumers, dead connections, suspension, deletion
 * and a graceful stop.
 */
import { afterEach, describe, expect, test } from 'bun:test'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { RawWs, WsProbe, authFrame, until } from '../support/ws.ts'
import { agent, msg } from '../messages/helpers.ts'
import { startWsRelay, type WsRelay } from './helpers.ts'

let r: WsRelay | undefined
afterEach(async () => {
  await r?.t.close()
  r = undefined
})

const UNLIMITED = { rateLimits: { sendPerMin: 0, pollPerMin: 0 } }

describe('slow consumer', () => {
  test('a client that stops reading: bounded memory, other agents unaffected, missed messages stay sent and arrive once it reads', async () => {
    r = await startWsRelay(UNLIMITED)
    const alice = await agent(r.t)
    const slow = await agent(r.t)
    const other = await agent(r.t)
    const raw = await RawWs.open(r.port)
    raw.sendText(JSON.stringify(authFrame(r.t, slow.transport.keys)))
    await until(() => raw.texts.length >= 1)
    expect(raw.frames()[0].status).toBe('ok')
    raw.pause()
    const fast = await WsProbe.authed(r.t, r.url, other.transport.keys)
    const hub = r.t.relay.features.realtime.hub
    const [conn] = hub.connectionsOf(slow.publicKey)

    // ~200 KiB per message: the kernel buffers fill after a few MiB, then the relay stops pushing
    const big = 'x'.repeat(200 * 1024)
    const ids: string[] = []
    for (let i = 0; i < 100 && !conn.isCongested; i++) {
      ids.push((await alice.send(msg(slow, { body: big }))).message_id)
      r.t.clock.advance(1)
    }
    expect(conn.isCongested).toBe(true)
    for (let i = 0; i < 20; i++) {
      ids.push((await alice.send(msg(slow, { body: big }))).message_id)
      r.t.clock.advance(1)
    }
    // memory: at most one message waits in the relay for this socket
    const health = hub.report()
    expect(health.slow_consumers).toBe(1)
    expect(health.buffered_bytes).toBeLessThan(2 * big.length)

    // another agent is served at once
    const { message_id } = await alice.send(msg(other, { body: 'for the fast one' }))
    expect((await fast.next('message')).message.message_id).toBe(message_id)

    // the last messages were not pushed and stay sent
    for (const id of ids.slice(-20)) expect((await alice.messageStatus(id)).status).toBe('sent')

    // reading again: the socket drains and the relay catches up, each message once, in order
    raw.resume()
    await until(() => raw.frames().filter((f) => f.type === 'message').length >= ids.length, 10_000, 'every message')
    await Bun.sleep(50)
    const got = raw.frames().filter((f) => f.type === 'message').map((f) => f.message.message_id)
    expect(got).toEqual(ids)
    expect(hub.report().slow_consumers).toBe(0)
    raw.destroy()
    fast.close()
  })
})

describe('keepalive', () => {
  test('a connection that does not answer pings is closed; one that does stays', async () => {
    r = await startWsRelay({ ws: { maxConnections: 5, pingIntervalMs: 300, authTimeoutMs: 10_000 } })
    const keys = generateKeyPair()
    const dead = await RawWs.open(r.port)
    dead.sendText(JSON.stringify(authFrame(r.t, keys)))
    const live = await WsProbe.authed(r.t, r.url, keys)
    await until(() => dead.texts.length >= 1)
    await until(() => dead.closed, 5000, 'the silent connection to be closed')
    expect(live.closed).toBeNull()
    expect(r.t.relay.features.realtime.hub.connectionsOf(keys.publicKey)).toHaveLength(1)
    live.close()
  })
})

describe('closing', () => {
  test('suspension closes the agent’s sockets (4003)', async () => {
    r = await startWsRelay()
    const keys = generateKeyPair()
    const bystander = await WsProbe.authed(r.t, r.url, generateKeyPair())
    const [a, b] = await Promise.all([WsProbe.authed(r.t, r.url, keys), WsProbe.authed(r.t, r.url, keys)])
    await r.t.relay.services.agents.suspend(keys.publicKey, 'abuse')
    expect((await a.waitClosed()).code).toBe(4003)
    expect((await b.waitClosed()).code).toBe(4003)
    expect(bystander.closed).toBeNull()
    // and it cannot come back
    const c = await WsProbe.open(r.url)
    c.send(authFrame(r.t, keys))
    expect((await c.next()).error.code).toBe('agent_suspended')
    bystander.close()
  })

  test('a suspension written by `relay admin` (another process) closes the sockets once the relay sees it', async () => {
    r = await startWsRelay()
    const keys = generateKeyPair()
    const p = await WsProbe.authed(r.t, r.url, keys)
    r.t.clock.advance(1)
    // as `relay admin` does it: straight into the database, not through the relay
    await r.t.sql(`UPDATE agents SET status = 'suspended', suspended_reason = 'by the operator', updated_at = ? WHERE public_key = ?`, [r.t.clock.now(), keys.publicKey])
    await r.t.relay.watchSuspensions()
    expect((await p.waitClosed()).code).toBe(4003)
  })

  test('DELETE of the agent closes its sockets (4004); its messages are gone', async () => {
    r = await startWsRelay()
    const bob = await agent(r.t)
    const p = await WsProbe.authed(r.t, r.url, bob.transport.keys)
    await bob.deleteAgent()
    expect((await p.waitClosed()).code).toBe(4004)
  })

  test('a graceful stop closes every socket with 1001', async () => {
    r = await startWsRelay()
    const alice = await agent(r.t)
    const p1 = await WsProbe.authed(r.t, r.url, alice.transport.keys)
    const p2 = await WsProbe.open(r.url) // not yet authenticated
    const t = r.t
    r = undefined
    await t.close()
    expect((await p1.waitClosed()).code).toBe(1001)
    expect((await p2.waitClosed()).code).toBe(1001)
  })

  test('a graceful stop does not wait for a client that never answers the close', async () => {
    r = await startWsRelay()
    const keys = generateKeyPair()
    const raw = await RawWs.open(r.port)
    raw.sendText(JSON.stringify(authFrame(r.t, keys)))
    await until(() => raw.texts.length >= 1)
    raw.pause()
    const t = r.t
    r = undefined
    const started = Date.now()
    await t.close()
    expect(Date.now() - started).toBeLessThan(3000)
    raw.destroy()
  })
})
