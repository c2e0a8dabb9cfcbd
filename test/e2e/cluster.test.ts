/**
 * Cluster mode end to end: three compiled relays on one PostgreSQL database and one S3-compatible
 * bucket (s3rver), each with a data directory of its own, as three machines behind a load balancer
 * would run. Whatever instance a request reaches, the relay behaves as one: a message sent through A
 * is pushed on B and polled on C, a request replayed to another instance is refused, rate limits and
 * per-agent socket counts hold over all of them, a webhook attempt is made once, and an instance killed
 * with -9 under load loses nothing it acknowledged. Then the README's example: nginx (deploy/nginx.conf)
 * balancing the three, one of them dead.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { rmSync } from 'node:fs'
import { bodyHash } from '../../src/auth/canonical.ts'
import { generateKeyPair, signRequest } from '../../src/auth/sign.ts'
import { RelayClient, type KeyPair, type MessageJson, type RelaySocket } from '../../src/client/index.ts'
import { postgresRunner, startPostgres, type TestPostgres } from '../support/postgres.ts'
import { s3ServerRunner, startS3Server, type S3Server } from '../support/s3.ts'
import { WebhookReceiver } from '../support/webhook-receiver.ts'
import { until } from '../support/ws.ts'
import { startBinary, tempDataDir, type RunningRelay } from './binary.ts'
import { PROXIES, waitForPort } from '../proxy/proxies.ts'
import { freePort } from '../support/binary.ts'
import { requireProgram } from '../support/requires.ts'

const node = s3ServerRunner('the cluster end-to-end test')
const pgBin = postgresRunner('the cluster end-to-end test')
let pg: TestPostgres | null = null
let s3: S3Server | null = null
let databaseUrl = ''
const relays: RunningRelay[] = []
const dirs: string[] = []

async function startInstance(extra: Record<string, string> = {}): Promise<RunningRelay> {
  const dir = tempDataDir()
  dirs.push(dir)
  const relay = await startBinary(dir, {
    RELAY_DATABASE_URL: databaseUrl,
    RELAY_BLOB_STORE: (s3 as S3Server).url('cluster/'),
    ...(s3 as S3Server).env,
    RELAY_WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    RELAY_WS_MAX_CONNECTIONS: '3',
    // the crash test reads back more messages than a minute's receive limit; limits have their own tests
    RELAY_RATE_POLL_PER_MIN: '0',
    ...extra,
  })
  relays.push(relay)
  return relay
}

const client = (relay: RunningRelay, keys: KeyPair) => new RelayClient({ baseUrl: relay.url, keys, rateLimitRetry: false })

/** Collects every message pushed on `socket` into `into` (without acking them). */
function collect(socket: RelaySocket, into: MessageJson[]): void {
  socket.onMessage = (m) => void into.push(m)
}

let A: RunningRelay
let B: RunningRelay
let C: RunningRelay

const available = node !== null && pgBin !== null

describe.skipIf(!available)('three relays on one PostgreSQL database and one bucket', () => {
  beforeAll(async () => {
    ;[pg, s3] = await Promise.all([startPostgres(pgBin as string), startS3Server(node as string)])
    databaseUrl = await pg.createDatabase('cluster_e2e')
    // the first start migrates; the others start together and race for the migration lock
    A = await startInstance()
    ;[B, C] = await Promise.all([startInstance(), startInstance()])
  }, 120_000)

  afterAll(async () => {
    await Promise.all(relays.map((r) => r.crash().catch(() => {})))
    for (const d of dirs) rmSync(d, { recursive: true, force: true })
    await Promise.all([pg?.remove(), s3?.stop()])
  })

  test('each instance reports the shared storage in its health details', async () => {
    for (const r of [A, B, C]) {
      const details = (await (await fetch(`${r.url}/v1/health/details`)).json()) as any
      expect(JSON.stringify(details)).toContain('postgres')
      expect(JSON.stringify(details)).toContain('s3')
    }
  })

  test('sent through A: pushed on a socket held by B, polled on C, its status read on any', async () => {
    const alice = generateKeyPair()
    const bob = generateKeyPair()
    await client(C, bob).getAgent() // bob exists (first request creates the agent)
    const pushed: MessageJson[] = []
    const socket = await client(B, bob).connect()
    collect(socket, pushed)
    const sent = await client(A, alice).send({ recipient_key: bob.publicKey, body: { hello: 'from A' } })
    await until(() => pushed.find((m) => m.message_id === sent.message_id), 5000, 'the push on B')
    expect(pushed.find((m) => m.message_id === sent.message_id)?.body).toEqual({ hello: 'from A' })
    // pushed but not acked: still there for a poll on C, which marks it delivered
    const page = await client(C, bob).poll()
    expect(page.messages.map((m) => m.message_id)).toContain(sent.message_id)
    expect((await client(B, alice).messageStatus(sent.message_id)).status).toBe('delivered')
    socket.close()
  })

  test('a request accepted by A and replayed to B is refused with 409', async () => {
    const keys = generateKeyPair()
    const body = JSON.stringify({ recipient_key: keys.publicKey, body: 'once' })
    const timestamp = new Date().toISOString()
    const headers = { ...signRequest(keys, 'POST', '/v1/messages', undefined, timestamp, bodyHash(body)), 'X-M2M-Timestamp': timestamp, 'content-type': 'application/json' }
    const first = await fetch(`${A.url}/v1/messages`, { method: 'POST', headers, body })
    expect(first.status).toBe(201)
    const again = await fetch(`${B.url}/v1/messages`, { method: 'POST', headers, body })
    expect(again.status).toBe(409)
    expect(((await again.json()) as any).error.code).toBe('replay_detected')
  })

  test("an agent's 31st send in a minute is refused whichever instance it reaches", async () => {
    const keys = generateKeyPair()
    const to = generateKeyPair().publicKey
    const instances = [A, B, C]
    for (let i = 0; i < 30; i++) await client(instances[i % 3], keys).send({ recipient_key: to, body: i })
    for (const r of instances) {
      const res = await client(r, keys).send({ recipient_key: to, body: 'one too many' }).catch((e) => e)
      expect(res.status).toBe(429)
      expect(res.code).toBe('rate_limit_exceeded')
    }
  })

  test('per-agent WebSocket limit counts sockets on every instance', async () => {
    const keys = generateKeyPair()
    const sockets = [await client(A, keys).connect(), await client(B, keys).connect(), await client(C, keys).connect()]
    const fourth = await client(A, keys)
      .connect()
      .then((s) => ({ ok: true, s }))
      .catch((e: Error) => ({ ok: false, e }))
    expect(fourth.ok).toBe(false)
    sockets[1].close()
    await sockets[1].closed
    // the count is shared: once B's socket is gone, C accepts one more
    const again = await until(() => client(C, keys).connect().catch(() => null), 5000, 'a free socket slot')
    again.close()
    for (const s of sockets) s.close()
  })

  test('a blob uploaded through A downloads through B; ranged reads work', async () => {
    const keys = generateKeyPair()
    const bytes = new Uint8Array(3 * 1024 * 1024).map((_, i) => (i * 7) & 0xff)
    const blob = await client(A, keys).uploadBlob(bytes, { contentType: 'application/octet-stream' })
    const whole = new Uint8Array(await (await client(B, keys).downloadBlob(blob.blob_id)).arrayBuffer())
    expect(whole.length).toBe(bytes.length)
    expect(Buffer.compare(whole, bytes)).toBe(0)
    const part = await client(C, keys).downloadBlob(blob.blob_id, { range: { start: 10, end: 19 } })
    expect(part.status).toBe(206)
    expect([...new Uint8Array(await part.arrayBuffer())]).toEqual([...bytes.subarray(10, 20)])
  })

  test('200 sends at once through A: answered 201 once committed in shared groups, each pushed once on B or C', async () => {
    const recipients = Array.from({ length: 10 }, () => generateKeyPair())
    const pushed = new Map<string, number>()
    const sockets = await Promise.all(
      recipients.map(async (keys, i) => {
        const socket = await client(i % 2 ? B : C, keys).connect()
        socket.onMessage = (m) => void pushed.set(m.message_id, (pushed.get(m.message_id) ?? 0) + 1)
        return socket
      }),
    )
    try {
      const health = async () => ((await (await fetch(`${A.url}/v1/health/details`)).json()) as any)
      const grouped = (h: any): { groups: number; units: number } => JSON.parse(JSON.stringify(h).match(/"grouped":(\{[^}]*\})/)?.[1] ?? 'null')
      const before = grouped(await health())
      // 20 senders of 10 messages each: under the send limit of 30 a minute
      const senders = Array.from({ length: 20 }, () => client(A, generateKeyPair()))
      const sent = await Promise.all(Array.from({ length: 200 }, (_, i) => senders[i % 20].send({ recipient_key: recipients[i % 10].publicKey, body: { i } })))
      const ids = sent.map((m) => m.message_id)
      expect(new Set(ids).size).toBe(200)
      await until(() => ids.every((id) => pushed.has(id)), 20_000, 'every push')
      await Bun.sleep(300)
      expect(ids.every((id) => pushed.get(id) === 1)).toBe(true)
      const after = grouped(await health())
      expect(after.units - before.units).toBe(200)
      expect(after.groups - before.groups).toBeLessThan(200)
    } finally {
      for (const s of sockets) s.close()
    }
  }, 60_000)

  test('a webhook gets each message once although every instance dispatches', async () => {
    const receiver = WebhookReceiver.start()
    try {
      const owner = generateKeyPair()
      await client(A, owner).setWebhook(receiver.url, Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('base64url'))
      const senders = [A, B, C].map((r) => client(r, generateKeyPair()))
      const ids: string[] = []
      for (let i = 0; i < 24; i++) ids.push((await senders[i % 3].send({ recipient_key: owner.publicKey, body: { i } })).message_id)
      await until(() => new Set(receiver.received.map((r) => r.json?.message?.message_id)).size >= ids.length, 20_000, 'every delivery')
      await Bun.sleep(1500) // a duplicate attempt would arrive meanwhile
      const delivered = receiver.received.map((r) => r.json?.message?.message_id)
      expect(delivered.sort()).toEqual([...ids].sort())
    } finally {
      receiver.server.stop(true)
    }
  }, 40_000)

  test('kill -9 of one instance under load: nothing acknowledged is lost, sockets resume on another instance', async () => {
    const recipient = generateKeyPair()
    await client(B, recipient).getAgent()
    const pushedOnA: MessageJson[] = []
    const onA = await client(A, recipient).connect()
    collect(onA, pushedOnA)
    const senders = Array.from({ length: 24 }, () => generateKeyPair())
    const acknowledged = new Set<string>()
    let stop = false
    const load = senders.map(async (keys, w) => {
      // each sender stays under the per-agent send rate; they alternate between the three instances
      for (let i = 0; i < 25 && !stop; i++) {
        const via = [A, B, C][(w + i) % 3]
        try {
          acknowledged.add((await client(via, keys).send({ recipient_key: recipient.publicKey, body: { w, i } })).message_id)
        } catch {
          // refused, or cut off by the crash: no promise was made
        }
      }
    })
    await until(() => acknowledged.size >= 150, 20_000, '150 acknowledged sends')
    await A.crash()
    await Promise.all(load)
    stop = true
    // the socket reconnects through the balancer to another instance: un-acked messages come as backlog
    const pushedOnC: MessageJson[] = []
    const onC = await client(C, recipient).connect()
    collect(onC, pushedOnC)
    await until(() => [...acknowledged].every((id) => pushedOnA.some((m) => m.message_id === id) || pushedOnC.some((m) => m.message_id === id)), 20_000, 'every acknowledged message pushed on A or C')
    // and every one of them is in the recipient's inbox for a poll on B
    const polled = new Set<string>()
    for await (const page of client(B, recipient).pollPages({ limit: 100 })) for (const m of page.messages) polled.add(m.message_id)
    const missing = [...acknowledged].filter((id) => !polled.has(id))
    expect(missing).toEqual([])
    onC.close()
  }, 90_000)
  const nginx = PROXIES.find((p) => p.name === 'nginx')!
  test.skipIf(!requireProgram('nginx', nginx.program, 'the cluster behind nginx test'))(
    'behind nginx (deploy/nginx.conf balancing all three, one of them killed): sends, pushes and polls go through',
    async () => {
      const dir = tempDataDir()
      dirs.push(dir)
      const port = await freePort()
      const proxy = await nginx.start(dir, port, [A.port, B.port, C.port])
      try {
        await waitForPort(port, proxy)
        const front = { url: `http://127.0.0.1:${port}` } as RunningRelay
        const recipient = generateKeyPair()
        const pushed: MessageJson[] = []
        const socket = await client(front, recipient).connect()
        collect(socket, pushed)
        const sender = generateKeyPair()
        const ids: string[] = []
        for (let i = 0; i < 20; i++) ids.push((await client(front, sender).send({ recipient_key: recipient.publicKey, body: { i } })).message_id)
        await until(() => ids.every((id) => pushed.some((m) => m.message_id === id)), 10_000, 'every message pushed through nginx')
        const polled = await client(front, recipient).poll({ limit: 50 })
        expect(polled.messages.map((m) => m.message_id).sort()).toEqual([...ids].sort())
        socket.close()
      } finally {
        proxy.kill('SIGTERM')
        await proxy.exited
      }
    },
    30_000,
  )
})
