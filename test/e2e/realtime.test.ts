/**
 * End to end against the compiled binary: WebSocket push and send through the client, a graceful stop
 * closing sockets with 1001, and a webhook attempt cut off by kill -9 made again after the restart.
 */
import { afterAll, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { rmSync } from 'node:fs'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { RelayClient, type MessageJson } from '../../src/client/index.ts'
import { WebhookReceiver } from '../support/webhook-receiver.ts'
import { until } from '../support/ws.ts'
import { startBinary, tempDataDir, type RunningRelay } from './binary.ts'

const dataDir = tempDataDir()
const env = { RELAY_RATE_SEND_PER_MIN: '0', RELAY_RATE_POLL_PER_MIN: '0', RELAY_WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' }
let running: RunningRelay | undefined
const rx = WebhookReceiver.start()
afterAll(async () => {
  if (running) await running.crash().catch(() => {})
  rx.stop()
  rmSync(dataDir, { recursive: true, force: true })
})

test('WebSocket: listen receives the backlog and live messages, send answers send_result, stop closes with 1001', async () => {
  running = await startBinary(dataDir, env)
  const alice = new RelayClient({ baseUrl: running.url, keys: generateKeyPair() })
  const bob = new RelayClient({ baseUrl: running.url, keys: generateKeyPair() })
  const waiting = await alice.send({ recipient_key: bob.publicKey, body: 'waiting' })
  const got: MessageJson[] = []
  const stop = new AbortController()
  const listening = bob.listen({ signal: stop.signal, onMessage: (m) => void got.push(m) })
  await until(() => got.length === 1, 5000, 'the backlog')
  const socket = await alice.connect()
  const viaSocket = await socket.send({ recipient_key: bob.publicKey, body: 'live' })
  expect(viaSocket.status).toBe('sent')
  await until(() => got.length === 2, 5000, 'the live message')
  expect(got.map((m) => m.message_id)).toEqual([waiting.message_id, viaSocket.message_id])
  await until(async () => (await alice.messageStatus(viaSocket.message_id)).status === 'delivered' || undefined, 5000)
  stop.abort()
  await listening

  expect(await running.stop()).toBe(0)
  expect((await socket.closed).code).toBe(1001)
  running = undefined
})

test('a webhook attempt in flight when the relay is killed is made again after the restart, with the same delivery id', async () => {
  running = await startBinary(dataDir, env)
  const alice = new RelayClient({ baseUrl: running.url, keys: generateKeyPair() })
  const bob = new RelayClient({ baseUrl: running.url, keys: generateKeyPair() })
  await bob.setWebhook(rx.url, randomBytes(32).toString('base64url'))
  rx.answer('hang')
  const sent = await alice.send({ recipient_key: bob.publicKey, body: 'survive' })
  await until(() => rx.received.length === 1, 5000, 'the first attempt')
  await running.crash()
  running = await startBinary(dataDir, env)
  await until(() => rx.received.length === 2, 5000, 'the attempt after the restart')
  expect(rx.received[1].headers['x-m2m-delivery-id']).toBe(rx.received[0].headers['x-m2m-delivery-id'])
  expect(rx.received[1].raw).toBe(rx.received[0].raw)
  const fresh = new RelayClient({ baseUrl: running.url, keys: alice.transport.keys })
  await until(async () => (await fresh.messageStatus(sent.message_id)).status === 'delivered' || undefined, 5000)
  const health = await fresh.health('/details')
  expect(health.components.webhooks).toMatchObject({ status: 'ok', queue_depth: 0 })
  expect(health.components.websocket).toMatchObject({ status: 'ok', open_sockets: 0 })
})
