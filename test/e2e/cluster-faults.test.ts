/**
 * Cluster mode under faults: two whole relays on one PostgreSQL server of their own, which the tests
 * lock, cut off and restart. Whatever fails, every message the relay acknowledged reaches the socket of
 * its recipient, on whichever instance that socket is.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { SQL } from 'bun'
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { generateKeyPair, type KeyPair } from '../../src/auth/sign.ts'
import { RelayClient } from '../../src/client/index.ts'
import { withOverrides } from '../../src/config/load.ts'
import { FakeClock } from '../../src/lib/clock.ts'
import { createLogger, quietRepeats } from '../../src/lib/logger.ts'
import { createRelay, type Relay } from '../../src/relay.ts'
import { openPostgres } from '../../src/storage/postgres/open-postgres.ts'
import type { OpenedStorage } from '../../src/storage/open-storage.ts'
import type { BlobStore } from '../../src/services/ports.ts'
import { BASE_URL, tempDir, type TestRelay } from '../support/harness.ts'
import { postgresRunner, startPostgres, type TestPostgres } from '../support/postgres.ts'
import { s3ServerRunner, startS3Server } from '../support/s3.ts'
import { s3StoreFromUrl } from '../../src/blobs/s3/s3-blob-store.ts'
import { until, WsProbe } from '../support/ws.ts'

const bin = postgresRunner('cluster mode under faults')
const node = s3ServerRunner('cluster mode under faults (the bucket)')
/** Statements waiting on a lock fail after this long (short, so that a locked table fails reads quickly). */
const LOCK_WAIT_MS = 300
/** Signal link probes (short, so that a silent link is found within a second). */
const PROBE_MS = 250

interface Instance {
  relay: Relay
  opened: OpenedStorage
  ws: string
  dataDir: string
  /** Log lines (JSON) written by this instance. */
  lines: string[]
  client(keys?: KeyPair): RelayClient
}

describe.skipIf(bin === null)('cluster mode under faults', () => {
  const clock = new FakeClock()
  const signer = { clock } as TestRelay
  let pg: TestPostgres
  let url: string
  let dbName: string
  let a: Instance
  let b: Instance

  async function instance(on = url, poolSize?: number, blobStore?: BlobStore): Promise<Instance> {
    const dataDir = tempDir()
    const lines: string[] = []
    // as `relay serve` logs
    const logger = quietRepeats(createLogger('warn', (line) => lines.push(line)))
    const opened = await openPostgres(on, { logger, clock, lockWaitMs: LOCK_WAIT_MS, signalProbeMs: PROBE_MS, poolSize })
    const relay = createRelay(withOverrides({ dataDir, host: '127.0.0.1', port: 0, logLevel: 'warn' }), { clock, logger, opened, blobStore })
    const { port } = await relay.start()
    return {
      relay,
      opened,
      ws: `ws://127.0.0.1:${port}/v1/ws`,
      dataDir,
      lines,
      client: (keys = generateKeyPair()) =>
        new RelayClient({ baseUrl: BASE_URL, keys, now: () => clock.now(), rateLimitRetry: false, fetch: (req) => relay.handle(req) }),
    }
  }

  async function admin<T>(fn: (sql: SQL) => Promise<T>): Promise<T> {
    const sql = new SQL({ url: pg.url, max: 1 })
    try {
      return await fn(sql)
    } finally {
      await sql.close()
    }
  }

  /** Ends the LISTEN connections of the relays' database (Bun reconnects them). */
  const killListeners = () =>
    admin((sql) => sql.unsafe(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND query ILIKE 'LISTEN%'`, [dbName]))

  const ready = async (i: Instance) => (await i.relay.handle(new Request(`${BASE_URL}/v1/health/ready`))).status

  /** The server processes of the relays' listening connections. */
  const listenerPids = () =>
    admin(async (sql) =>
      ((await sql.unsafe(`SELECT pid FROM pg_stat_activity WHERE datname = $1 AND query ILIKE 'LISTEN%'`, [dbName])) as { pid: number }[]).map((r) => r.pid),
    )

  /** A recipient with an open inbox and its socket on `on`. */
  async function listener(on: Instance) {
    const keys = generateKeyPair()
    await on.client(keys).updateProfile({ inbox_policy: 'open' })
    const socket = await WsProbe.authed(signer, on.ws, keys)
    return { keys, socket }
  }

  /** Every id in `ids` was pushed on `socket` exactly once. */
  async function allPushed(socket: WsProbe, ids: string[], ms = 10_000) {
    await until(() => ids.every((id) => socket.messages().some((m) => m.message_id === id)), ms, `${ids.length} pushes`)
    const pushed = socket.messages().map((m) => m.message_id).filter((id) => ids.includes(id))
    expect(pushed.sort()).toEqual([...ids].sort())
  }

  beforeAll(async () => {
    pg = await startPostgres(bin as string)
    url = await pg.createDatabase('faults')
    dbName = new URL(url).pathname.slice(1)
    a = await instance()
    b = await instance()
  }, 60_000)

  afterAll(async () => {
    for (const i of [a, b]) {
      if (!i) continue
      await i.relay.stop()
      rmSync(i.dataDir, { recursive: true, force: true })
    }
    await pg?.remove()
  }, 60_000)

  test('a backlog re-read that fails is retried: the socket gets every message sent after it', async () => {
    const { keys, socket } = await listener(b)
    let resyncs = 0
    b.opened.signals.onResync(() => resyncs++)
    const failedBefore = b.lines.filter((l) => l.includes('websocket backlog read failed')).length
    // the table is locked: B's re-read after its signal link comes back waits, then fails
    let unlock!: () => void
    const unlocked = new Promise<void>((r) => (unlock = r))
    const locker = new SQL({ url, max: 1 })
    let locked!: () => void
    const isLocked = new Promise<void>((r) => (locked = r))
    const holding = locker.begin(async (tx) => {
      await tx.unsafe('LOCK TABLE messages IN ACCESS EXCLUSIVE MODE')
      locked()
      await unlocked
    })
    try {
      await isLocked
      await killListeners()
      await until(() => resyncs > 0, 15_000, 'the resync')
      await until(() => b.lines.filter((l) => l.includes('websocket backlog read failed')).length > failedBefore, 5000, 'a failed re-read')
    } finally {
      unlock()
      await holding
      await locker.close()
    }
    const alice = a.client()
    const ids: string[] = []
    for (let i = 0; i < 5; i++) ids.push((await alice.send({ recipient_key: keys.publicKey, body: { n: i } })).message_id)
    await allPushed(socket, ids)
    expect(socket.closed).toBeNull()
    socket.close()
  }, 30_000)

  test('a stalled signal link: not ready meanwhile, reconnected with backoff, and every message sent meanwhile is pushed across', async () => {
    const onA = await listener(a)
    const onB = await listener(b)
    expect(await ready(a)).toBe(200)
    expect(await ready(b)).toBe(200)
    // the pools hold a few connections; the admin connection stays open while new ones are refused
    for (const i of [a, b]) {
      const pool = (i.opened.storage as unknown as { sql: SQL }).sql
      await Promise.all(Array.from({ length: 6 }, () => pool.unsafe('SELECT pg_sleep(0.05)')))
    }
    const linesBefore = b.lines.length
    const held = new SQL({ url: pg.url, max: 1 })
    const hba = join(pg.dataDir, 'pg_hba.conf')
    const original = readFileSync(hba, 'utf8')
    const pids = await listenerPids()
    expect(pids.length).toBe(2)
    try {
      writeFileSync(hba, `host all all 127.0.0.1/32 reject\n${original}`)
      await held.unsafe('SELECT pg_reload_conf()')
      // the listening connections' server processes stop (a hung backend, a cut that TCP does not see)
      for (const pid of pids) process.kill(pid, 'SIGSTOP')
      // sends work meanwhile (the pools are fine), on both instances and both ways
      const toB: string[] = []
      const toA: string[] = []
      for (let i = 0; i < 3; i++) {
        toB.push((await a.client().send({ recipient_key: onB.keys.publicKey, body: { i } })).message_id)
        toA.push((await b.client().send({ recipient_key: onA.keys.publicKey, body: { i } })).message_id)
      }
      await until(async () => (await ready(a)) === 503 && (await ready(b)) === 503, 10_000, 'both instances not ready')
      const details = (await (await b.relay.handle(new Request(`${BASE_URL}/v1/health/details`))).json()) as any
      expect(details.components.database).toMatchObject({ status: 'degraded', signal_link: 'down' })
      // nothing crossed while the links were down
      expect(onB.socket.messages().filter((m) => toB.includes(m.message_id))).toEqual([])
      // new connections are accepted again: each opens a new link, hears itself and resyncs its sockets
      writeFileSync(hba, original)
      await held.unsafe('SELECT pg_reload_conf()')
      await until(async () => (await ready(a)) === 200 && (await ready(b)) === 200, 20_000, 'both instances ready again')
      await allPushed(onB.socket, toB)
      await allPushed(onA.socket, toA)
      // and notices flow again
      const after = (await a.client().send({ recipient_key: onB.keys.publicKey, body: 'after' })).message_id
      await allPushed(onB.socket, [after])
      // one line when the link went silent and one when it came back, per instance
      expect(b.lines.slice(linesBefore).filter((l) => l.includes('signal link')).length).toBe(2)
    } finally {
      if (readFileSync(hba, 'utf8') !== original) {
        writeFileSync(hba, original)
        await held.unsafe('SELECT pg_reload_conf()').catch(() => {})
      }
      await held.close()
      for (const pid of pids) {
        try {
          process.kill(pid, 'SIGCONT')
        } catch {}
      }
    }
    onA.socket.close()
    onB.socket.close()
  }, 60_000)

  test('a pool of 2: jobs holding a connection leave one for statements; a burst of 100 sends waits its turn, every one is pushed, no more connections are opened', async () => {
    const small = await pg.createDatabase('pool')
    const c = await instance(small, 2)
    try {
      const { keys, socket } = await listener(c)
      const sends = await Promise.all(
        Array.from({ length: 100 }, (_, i) => c.client().send({ recipient_key: keys.publicKey, body: { i } })),
      )
      await allPushed(socket, sends.map((m) => m.message_id))
      const counts = await admin(
        async (sql) =>
          (await sql.unsafe(`SELECT application_name AS app, count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 GROUP BY 1`, [
            new URL(small).pathname.slice(1),
          ])) as { app: string; n: number }[],
      )
      const by = Object.fromEntries(counts.map((r) => [r.app.startsWith('relay-signals/') ? 'relay-signals' : r.app, r.n]))
      expect(by.relay).toBeLessThanOrEqual(2)
      expect(by['relay-signals']).toBe(1)
      socket.close()
    } finally {
      await c.relay.stop()
      rmSync(c.dataDir, { recursive: true, force: true })
    }
  }, 30_000)

  test.skipIf(node === null)('a bucket outage: instances stay ready and report degraded, uploads answer 503, messages still reach their listeners', async () => {
    const s3 = await startS3Server(node as string)
    let stopped = false
    const c = await instance(url, undefined, s3StoreFromUrl(s3.url('faults/'), s3.env, clock))
    try {
      const { keys, socket } = await listener(c)
      const uploader = c.client()
      expect((await uploader.uploadBlob(new TextEncoder().encode('before'), { contentType: 'text/plain' })).blob_id).toBeString()
      await s3.stop()
      stopped = true
      expect(await ready(c)).toBe(200)
      const details = (await (await c.relay.handle(new Request(`${BASE_URL}/v1/health/details`))).json()) as any
      expect(details.components.blob_store.status).toBe('degraded')
      expect(details.components.blob_store.error).toContain('unreachable')
      const refused = await uploader.uploadBlob(new TextEncoder().encode('during'), { contentType: 'text/plain' }).catch((e) => e)
      expect([refused.status, refused.code]).toEqual([503, 'service_unavailable'])
      const ids: string[] = []
      for (let i = 0; i < 3; i++) ids.push((await a.client().send({ recipient_key: keys.publicKey, body: { i } })).message_id)
      await allPushed(socket, ids)
      socket.close()
    } finally {
      await c.relay.stop()
      rmSync(c.dataDir, { recursive: true, force: true })
      if (!stopped) await s3.stop()
    }
  }, 60_000)

  test('connections killed under load: statements cut before their commit are retried on a fresh one, every send is acknowledged and pushed', async () => {
    const { keys, socket } = await listener(b)
    const senders = Array.from({ length: 30 }, () => a.client())
    // a burst through A while the server ends every statement connection of the relays (not the listeners)
    const burst = Promise.all(senders.map((s, i) => s.send({ recipient_key: keys.publicKey, body: { i } }).then((m) => m.message_id, (e) => e)))
    await Bun.sleep(5)
    await admin((sql) => sql.unsafe(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND application_name = 'relay'`, [dbName]))
    const results = await burst
    const failures = results.filter((r) => typeof r !== 'string')
    expect(failures.map((f) => `${f.status} ${f.code}`)).toEqual([])
    await allPushed(socket, results as string[])
    socket.close()
  }, 30_000)

  // last: the server restarts
  test('a database outage: a few log lines per instance, not one per attempt; afterwards every message reaches its listener', async () => {
    const { keys, socket } = await listener(b)
    const before = [a.lines.length, b.lines.length]
    await pg.stop()
    await Bun.sleep(8000)
    const during = [a.lines.length - before[0], b.lines.length - before[1]]
    await pg.start()
    await until(async () => (await ready(a)) === 200 && (await ready(b)) === 200, 30_000, 'both instances ready again')
    const ids: string[] = []
    for (let i = 0; i < 3; i++) ids.push((await a.client().send({ recipient_key: keys.publicKey, body: { i } })).message_id)
    await allPushed(socket, ids, 15_000)
    // each failing timer says so once (the same failure is held back for 30 s), not once per attempt
    expect(Math.max(...during)).toBeLessThanOrEqual(12)
    socket.close()
  }, 90_000)
})
