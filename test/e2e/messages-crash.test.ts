/**
 * End to end against the compiled binary: messages answered 201 survive `kill -9` (docs/protocol.md §4.3: the
 * answer comes only after the commit) — alone, and in rounds mixed with blob uploads and webhook
 * deliveries — and the pipeline's limits hold over real HTTP.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { rmSync } from 'node:fs'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { RelayClient, type KeyPair } from '../../src/client/index.ts'
import { relayBinary, startBinary, tempDataDir, type RunningRelay } from './binary.ts'
import { crashRounds } from './crash-load.ts'

const dataDir = tempDataDir()
const baseEnv = { RELAY_RATE_SEND_PER_MIN: '0', RELAY_RATE_POLL_PER_MIN: '0' }
const env = baseEnv
let running: RunningRelay | undefined
afterAll(async () => {
  if (running) await running.crash().catch(() => {})
  rmSync(dataDir, { recursive: true, force: true })
})

// the first call builds the binary: not part of any test's time
beforeAll(async () => void (await relayBinary()), 120_000)

const clientOf = (relay: RunningRelay, keys: KeyPair) => new RelayClient({ baseUrl: relay.url, keys })

for (const durability of ['fsync', 'process'] as const) {
  test(`RELAY_DURABILITY=${durability}: every message answered 201 is there after kill -9 and a restart`, async () => {
    const dataDir = tempDataDir()
    const env = { ...baseEnv, RELAY_DURABILITY: durability }
    try {
      running = await startBinary(dataDir, env)
      const senderKeys = generateKeyPair()
      const recipientKeys = [generateKeyPair(), generateKeyPair(), generateKeyPair()]
      const sender = clientOf(running, senderKeys)
      const acknowledged: { id: string; to: string }[] = []
      let inFlight = 0
      let stop = false
      // 24 senders in parallel until the crash; the crash comes while requests are in flight
      const workers = Array.from({ length: 24 }, async (_, w) => {
        for (let i = 0; !stop; i++) {
          const to = recipientKeys[(w + i) % recipientKeys.length].publicKey
          inFlight++
          try {
            const res = await sender.send({ recipient_key: to, body: { w, i } })
            acknowledged.push({ id: res.message_id, to })
          } catch {
            // refused or cut off by the crash: no promise was made
          } finally {
            inFlight--
          }
        }
      })
      while (acknowledged.length < 400) await Bun.sleep(5)
      expect(inFlight).toBeGreaterThan(0)
      await running.crash()
      stop = true
      await Promise.all(workers)
      const promised = acknowledged.length

      running = await startBinary(dataDir, env)
      const found = new Set<string>()
      for (const keys of recipientKeys) {
        const r = clientOf(running, keys)
        for await (const page of r.pollPages({ limit: 100 })) for (const m of page.messages) found.add(m.message_id)
      }
      const missing = acknowledged.filter((m) => !found.has(m.id))
      expect(missing).toEqual([])
      expect(found.size).toBeGreaterThanOrEqual(promised)
      // and each reads back intact for its sender
      const sample = await clientOf(running, senderKeys).getMessage(acknowledged[0].id)
      expect(sample.recipient_key).toBe(acknowledged[0].to)
      expect(sample.status).toBe('delivered')
    } finally {
      await running?.crash().catch(() => {})
      running = undefined
      rmSync(dataDir, { recursive: true, force: true })
    }
  }, 60_000)
}

test('over real HTTP: a request declaring more than 2 MiB is refused with 413 before it is read', async () => {
  running ??= await startBinary(dataDir, env)
  const c = clientOf(running, generateKeyPair())
  const big = JSON.stringify({ recipient_key: c.publicKey, body: 'x'.repeat(2 * 1024 * 1024) })
  const res = await c.transport.send('POST', '/v1/messages', big, { 'content-type': 'application/json' })
  expect(res.status).toBe(413)
  expect(((await res.json()) as any).error.code).toBe('payload_too_large')
  // the connection and the relay are fine afterwards
  const ok = await c.send({ recipient_key: c.publicKey, body: 'still here' })
  expect(ok.status).toBe('sent')
})

test('concurrent pollers over real HTTP never receive the same message', async () => {
  running ??= await startBinary(dataDir, env)
  const keys = generateKeyPair()
  const sender = clientOf(running, generateKeyPair())
  const sent = new Set<string>()
  await Promise.all(
    Array.from({ length: 8 }, async (_, w) => {
      for (let i = 0; i < 25; i++) sent.add((await sender.send({ recipient_key: keys.publicKey, body: { w, i } })).message_id)
    }),
  )
  const pollers = Array.from({ length: 6 }, () => clientOf(running!, keys))
  const got: string[] = []
  await Promise.all(
    pollers.map(async (p) => {
      for (;;) {
        const page = await p.poll({ limit: 7 })
        got.push(...page.messages.map((m) => m.message_id))
        if (page.messages.length === 0) return
      }
    }),
  )
  expect(got.length).toBe(new Set(got).size)
  expect(new Set(got)).toEqual(sent)
})

test('crash rounds: sends, blob uploads and webhook deliveries, kill -9 at random moments; every promise kept', async () => {
  const dir = tempDataDir()
  try {
    const report = await crashRounds({ dataDir: dir, rounds: 4, roundMs: [1500, 3500], senders: 12, uploaders: 3, blobMaxBytes: 256 * 1024, deliveryWaitMs: 20_000 })
    expect(report.messages).toBeGreaterThan(100)
    expect(report.blobs).toBeGreaterThan(10)
    expect(report.hookedMessages).toBeGreaterThan(50)
    expect(report.missingMessages).toEqual([])
    expect(report.badBlobs).toEqual([])
    expect(report.undelivered).toEqual([])
    expect(report.changedDeliveryIds).toEqual([])
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}, 90_000)
