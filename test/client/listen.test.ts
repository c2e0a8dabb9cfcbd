/** The client's WebSocket side: listen() reconnects with backoff and fresh auth, acks after the handler. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { generateKeyPair, type KeyPair } from '../../src/auth/sign.ts'
import { RelayApiError, RelayClient, type MessageJson } from '../../src/client/index.ts'
import { until } from '../support/ws.ts'
import { startWsRelay, type WsRelay } from '../realtime/helpers.ts'

let r: WsRelay
let baseUrl: string
beforeAll(async () => {
  r = await startWsRelay({ rateLimits: { sendPerMin: 0, pollPerMin: 0 } })
  baseUrl = `http://127.0.0.1:${r.port}`
})
afterAll(() => r.t.close())

const real = (keys: KeyPair = generateKeyPair()) => new RelayClient({ baseUrl, keys, now: () => r.t.clock.now() })
const hub = () => r.t.relay.features.realtime.hub

describe('listen', () => {
  test('reconnects after the connection drops, with a fresh auth frame, and keeps receiving', async () => {
    const bob = real()
    const alice = r.t.client()
    const got: string[] = []
    const drops: unknown[] = []
    const stop = new AbortController()
    const done = bob.listen({ signal: stop.signal, minBackoffMs: 20, onMessage: (m) => void got.push(m.message_id), onDisconnect: (d) => void drops.push(d) })
    await until(() => hub().connectionsOf(bob.publicKey).length === 1, 3000, 'a connection')
    const first = await alice.send({ recipient_key: bob.publicKey, body: 1 })
    await until(() => got.length === 1)
    ;(hub().connectionsOf(bob.publicKey)[0].socket as { terminate(): void }).terminate()
    await until(() => drops.length === 1)
    expect(drops[0]).toMatchObject({ code: 1006, retryInMs: expect.any(Number) })
    await until(() => hub().connectionsOf(bob.publicKey).length === 1, 3000, 'the reconnection')
    const second = await alice.send({ recipient_key: bob.publicKey, body: 2 })
    await until(() => got.length === 2)
    expect(got).toEqual([first.message_id, second.message_id])
    await until(async () => (await alice.messageStatus(second.message_id)).status === 'delivered' || undefined)
    stop.abort()
    await done
    await until(() => hub().connectionsOf(bob.publicKey).length === 0)
  })

  test('a handler that throws leaves the message sent: it comes again on the next connection', async () => {
    const bob = real()
    const alice = r.t.client()
    const sent = await alice.send({ recipient_key: bob.publicKey, body: 'retry me' })
    const errors: unknown[] = []
    const stop = new AbortController()
    let calls = 0
    const done = bob.listen({
      signal: stop.signal,
      minBackoffMs: 20,
      onError: (e) => void errors.push(e),
      onMessage: () => {
        calls++
        throw new Error('not now')
      },
    })
    await until(() => calls === 1)
    await until(() => errors.length === 1)
    expect((await alice.messageStatus(sent.message_id)).status).toBe('sent')
    stop.abort()
    await done
    const received: MessageJson[] = []
    const stop2 = new AbortController()
    const done2 = bob.listen({ signal: stop2.signal, onMessage: (m) => void received.push(m) })
    await until(() => received.length === 1)
    expect(received[0].message_id).toBe(sent.message_id)
    stop2.abort()
    await done2
  })

  test('gives up on an auth failure another attempt cannot fix', async () => {
    const keys = generateKeyPair()
    await r.t.relay.services.agents.suspend(keys.publicKey, null)
    const err = await real(keys).listen({ onMessage: () => {} }).catch((e) => e)
    expect(err).toBeInstanceOf(RelayApiError)
    expect(err.code).toBe('agent_suspended')
  })

  test('retries with growing backoff while the relay cannot be reached; abort ends it', async () => {
    const client = new RelayClient({ baseUrl: 'http://127.0.0.1:9', keys: generateKeyPair() })
    const waits: number[] = []
    const stop = new AbortController()
    const done = client.listen({ signal: stop.signal, minBackoffMs: 10, maxBackoffMs: 40, onMessage: () => {}, onDisconnect: (d) => void waits.push(d.retryInMs) })
    await until(() => waits.length >= 4, 5000)
    stop.abort()
    await done
    expect(waits[1]).toBeGreaterThan(waits[0])
    expect(Math.max(...waits)).toBeLessThanOrEqual(48)
  })
})

describe('stopping while connecting', () => {
  test('an abort during the connection attempt ends listen() and closes the socket it opened', async () => {
    const bob = real()
    const stop = new AbortController()
    // abort as the socket opens, before the auth answer: the loop must see it once connect resolves
    const Base = globalThis.WebSocket
    class Aborting extends Base {
      constructor(url: string) {
        super(url)
        this.addEventListener('open', () => stop.abort())
      }
    }
    const outcome = await Promise.race([
      bob.listen({ signal: stop.signal, WebSocket: Aborting as never, onMessage: () => {} }).then(() => 'resolved'),
      Bun.sleep(3000).then(() => 'still listening'),
    ])
    expect(outcome).toBe('resolved')
    await until(() => hub().connectionsOf(bob.publicKey).length === 0, 3000, 'the socket closed')
  })
})

describe('connect', () => {
  test('send resolves like POST and rejects with the relay error; ping round-trips; ack errors reach onError', async () => {
    const alice = real()
    const socket = await alice.connect()
    const ok = await socket.send({ recipient_key: generateKeyPair().publicKey, body: 'x' })
    expect(ok).toMatchObject({ status: 'sent', message_id: expect.stringMatching(/^msg_/) })
    const err = await socket.send({ recipient_key: 'bad', body: 'x' }).catch((e) => e)
    expect(err).toBeInstanceOf(RelayApiError)
    expect(err.code).toBe('bad_request')
    expect(err.details.fields).toHaveProperty('recipient_key')
    const errors: any[] = []
    socket.onError = (e) => void errors.push(e)
    socket.ack('msg_1_000000000000')
    await socket.ping()
    expect(errors).toEqual([{ code: 'message_not_found', message: expect.any(String), details: { message_id: 'msg_1_000000000000' } }])
    socket.close()
    expect((await socket.closed).code).toBe(1000)
  })
})
