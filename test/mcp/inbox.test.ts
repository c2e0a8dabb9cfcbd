/**
 * The bridge's pending inbox in process, against a real relay listening on a port (fake clock): the
 * cases a live session rarely shows — a socket the relay refuses, messages delivered elsewhere while
 * the bridge held them, expiry, paging.
 */
import { afterEach, beforeAll, describe, expect, test } from 'bun:test'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { Bridge } from '../../src/mcp/bridge.ts'
import { ChannelAnnouncer, type ChannelEvent } from '../../src/mcp/channel.ts'
import { FilePolicy } from '../../src/mcp/file-policy.ts'
import { tempDir } from '../support/harness.ts'
import { until } from '../support/ws.ts'
import { startWsRelay, type WsRelay } from '../realtime/helpers.ts'

let r: WsRelay
const bridges: Bridge[] = []
let files: FilePolicy
beforeAll(async () => {
  const dir = tempDir('relay-mcp-inbox-')
  files = await FilePolicy.create({ roots: [dir], keyFile: `${dir}/none.key`, allowOverwrite: false, env: {} })
})
afterEach(async () => {
  for (const b of bridges.splice(0)) await b.close()
  await r?.t.close()
})

async function relay(overrides: Parameters<typeof startWsRelay>[0] = {}) {
  r = await startWsRelay({ rateLimits: { sendPerMin: 0, pollPerMin: 0 }, ...overrides })
  return r
}

function bridge(inbox: { refusedRetryMs?: number } = {}): Bridge {
  const b = new Bridge({
    relayUrl: `http://127.0.0.1:${r.port}`,
    keys: generateKeyPair(),
    files,
    now: () => r.t.clock.now(),
    inbox: { minBackoffMs: 20, maxBackoffMs: 100, ...inbox },
  })
  bridges.push(b)
  b.start()
  return b
}

describe('when the relay refuses the socket', () => {
  test('the inbox says why and that it does not poll; nothing is taken from the relay; ack falls back to HTTP', async () => {
    await relay({ ws: { maxConnections: 0 } })
    const bob = bridge()
    const alice = r.t.client()
    const m = await alice.send({ recipient_key: bob.publicKey, body: 'waiting on the relay' })
    await until(() => bob.inbox.status().last_error !== undefined, 5000, 'a refused connection')
    const status = bob.inbox.status()
    expect(status.state).toBe('disconnected')
    expect(status.last_error).toContain('At most 0 WebSocket connections')
    expect(status.note).toContain('does not poll')
    expect(bob.inbox.list().messages).toEqual([])
    expect((await alice.messageStatus(m.message_id)).status).toBe('sent') // still on the relay, untouched

    // read by id while not receiving: one waiting for bob is not read (it would be taken); one bob sent is
    const refused = await bob.readMessage(m.message_id).then(
      () => null,
      (e: Error) => e,
    )
    expect(refused?.message).toContain('not receiving')
    expect((await alice.messageStatus(m.message_id)).status).toBe('sent')
    const mine = await bob.send({ recipient_key: alice.publicKey, body: 'from bob' })
    expect((await bob.readMessage(mine.message_id)).body).toBe('from bob')
    expect((await alice.messageStatus(mine.message_id)).status).toBe('sent')
    const outcome = await bob.inbox.ack([m.message_id, mine.message_id, 'msg_1_000000000000'])
    expect(outcome).toMatchObject({ via: 'http', acked: [m.message_id], not_found: [mine.message_id, 'msg_1_000000000000'], failed: [] })
    expect((await alice.messageStatus(m.message_id)).status).toBe('delivered')
    expect((await alice.messageStatus(mine.message_id)).status).toBe('sent')
  })
})

describe('when the relay refuses the agent', () => {
  test('a suspended agent: the state says refused, with the reason, and the bridge tries again later', async () => {
    await relay()
    const bob = bridge({ refusedRetryMs: 60_000 })
    await bob.inbox.whenSynced(3000)
    await r.t.relay.services.agents.suspend(bob.publicKey, 'abuse')
    await until(() => bob.inbox.status().state === 'refused', 5000, 'the refusal')
    const status = bob.inbox.status()
    expect(status.last_error).toContain('suspended')
    expect(status.retry_in_s).toBe(60)
    expect(status.note).toContain('not lost')
  })
})

describe('the pending set', () => {
  test('reading a pending message by id leaves it pending and sent', async () => {
    await relay()
    const bob = bridge()
    const alice = r.t.client()
    const m = await alice.send({ recipient_key: bob.publicKey, body: 'read me' })
    await until(() => bob.inbox.count === 1)
    expect((await bob.readMessage(m.message_id)).body).toBe('read me')
    expect(bob.inbox.count).toBe(1)
    expect((await alice.messageStatus(m.message_id)).status).toBe('sent')
    // one it sent is read from the relay (reading it changes nothing: only the recipient's read delivers)
    const mine = await bob.client.send({ recipient_key: alice.publicKey, body: 'mine' })
    expect((await bob.readMessage(mine.message_id)).body).toBe('mine')
    expect((await alice.messageStatus(mine.message_id)).status).toBe('sent')
  })

  test('after a reconnect, messages delivered elsewhere meanwhile leave the inbox; the others stay', async () => {
    await relay()
    const bob = bridge()
    const alice = r.t.client()
    const kept = await alice.send({ recipient_key: bob.publicKey, body: 'kept' })
    const taken = await alice.send({ recipient_key: bob.publicKey, body: 'taken elsewhere' })
    await until(() => bob.inbox.count === 2)
    // another client of the same agent reads it by id, which marks it delivered
    await bob.client.getMessage(taken.message_id)
    expect(bob.inbox.count).toBe(2)
    const hub = r.t.relay.features.realtime.hub
    ;(hub.connectionsOf(bob.publicKey)[0].socket as { terminate(): void }).terminate()
    await until(() => bob.inbox.count === 1, 5000, 'the reconciliation')
    expect(bob.inbox.list().messages.map((m) => m.message_id)).toEqual([kept.message_id])
    expect(bob.inbox.status()).toMatchObject({ state: 'connected', synced: true })
  })

  test('the channel announces each message once across a reconnect, though the relay pushes the pending ones again', async () => {
    await relay()
    const bob = bridge()
    const alice = r.t.client()
    const events: ChannelEvent[] = []
    const announcer = new ChannelAnnouncer(bob, async (e) => void events.push(e))
    announcer.start()
    const first = [await alice.send({ recipient_key: bob.publicKey, body: { text: 'one' } }), await alice.send({ recipient_key: bob.publicKey, body: { text: 'two' } })]
    await until(() => events.length === 2, 5000, 'two events')
    const hub = r.t.relay.features.realtime.hub
    const dropped = hub.connectionsOf(bob.publicKey)[0]
    ;(dropped.socket as { terminate(): void }).terminate()
    await until(() => hub.connectionsOf(bob.publicKey).some((c) => c !== dropped), 5000, 'the reconnection')
    await until(() => bob.inbox.status().state === 'connected' && bob.inbox.status().synced, 5000, 'the backlog again')
    const third = await alice.send({ recipient_key: bob.publicKey, body: { text: 'three' } })
    await until(() => events.length >= 3, 5000, 'the third event')
    await Bun.sleep(100)
    // the first two may come in the connection's backlog, ordered by id within one second of the fake clock
    const ids = events.map((e) => e.meta.message_id)
    expect(ids.length).toBe(3)
    expect(new Set(ids.slice(0, 2))).toEqual(new Set(first.map((m) => m.message_id)))
    expect(ids[2]).toBe(third.message_id)
    expect(bob.inbox.count).toBe(3)
    announcer.stop()
  })

  test('expired messages leave the inbox', async () => {
    await relay()
    const bob = bridge()
    await r.t.client().send({ recipient_key: bob.publicKey, body: 'short-lived', expires_in: 60 })
    await until(() => bob.inbox.count === 1)
    r.t.clock.advance(61_000)
    expect(bob.inbox.count).toBe(0)
  })

  test('pages oldest first with a cursor; a filter narrows; a bad cursor is refused', async () => {
    await relay()
    const bob = bridge()
    const alice = r.t.client()
    const carol = r.t.client()
    const ids: string[] = []
    for (let i = 0; i < 5; i++) {
      ids.push((await (i === 2 ? carol : alice).send({ recipient_key: bob.publicKey, body: i })).message_id)
      r.t.clock.advance(1000)
    }
    await until(() => bob.inbox.count === 5)
    const one = bob.inbox.list({ limit: 2 })
    expect(one).toMatchObject({ pending_count: 5, has_more: true })
    const two = bob.inbox.list({ limit: 2, cursor: one.next_cursor! })
    const three = bob.inbox.list({ limit: 2, cursor: two.next_cursor! })
    expect([...one.messages, ...two.messages, ...three.messages].map((m) => m.message_id)).toEqual(ids)
    expect(three).toMatchObject({ has_more: false, next_cursor: null })
    expect(bob.inbox.list({ from: carol.publicKey }).messages.map((m) => m.message_id)).toEqual([ids[2]])
    expect(() => bob.inbox.list({ cursor: 'nonsense' })).toThrow('invalid cursor')
  })

  test('wait resolves with the first matching arrival, and with null when aborted', async () => {
    await relay()
    const bob = bridge()
    const alice = r.t.client()
    await bob.inbox.whenSynced(3000)
    const waiting = bob.inbox.wait({ thread_id: 't-2' }, { timeoutMs: 10_000 })
    await alice.send({ recipient_key: bob.publicKey, body: 'other thread', thread_id: 't-1' })
    const match = await alice.send({ recipient_key: bob.publicKey, body: 'this one', thread_id: 't-2' })
    expect((await waiting)?.message_id).toBe(match.message_id)
    const stop = new AbortController()
    const aborted = bob.inbox.wait({ thread_id: 'never' }, { timeoutMs: 10_000, signal: stop.signal })
    stop.abort()
    expect(await aborted).toBeNull()
  })
})
