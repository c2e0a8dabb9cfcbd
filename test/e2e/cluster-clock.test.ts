/**
 * Cluster mode with clocks that disagree, and a database that restarts: three compiled relays on one
 * PostgreSQL server of their own, one of them 40 s behind and one 40 s ahead (Debian's faketime), far
 * past the 15 s after which a socket's heartbeat counts as lapsed. The per-agent WebSocket limit holds
 * across the instances whatever their clocks say, and again after PostgreSQL was down longer than
 * that; every message an instance acknowledged reaches every listener, on whichever instance it is.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { rmSync } from 'node:fs'
import { generateKeyPair, type KeyPair } from '../../src/auth/sign.ts'
import { RelayClient, type MessageJson, type RelaySocket } from '../../src/client/index.ts'
import { postgresRunner, startPostgres, type TestPostgres } from '../support/postgres.ts'
import { requireProgram } from '../support/requires.ts'
import { until } from '../support/ws.ts'
import { startBinary, tempDataDir, type RunningRelay } from './binary.ts'

const pgBin = postgresRunner('cluster mode with skewed clocks')
const faketime = requireProgram('faketime', Bun.which('faketime'), 'cluster mode with skewed clocks') ? Bun.which('faketime') : null
/** Sockets per agent (RELAY_WS_MAX_CONNECTIONS). */
const LIMIT = 2
/** How far the skewed instances are off: past three heartbeats (15 s). */
const SKEW_MS = 40_000

interface Instance {
  relay: RunningRelay
  /** This instance's clock offset: its clients sign with it, as clients in its time zone of error would. */
  skewMs: number
  dir: string
}

describe.skipIf(pgBin === null || faketime === null)('three relays whose clocks disagree, on one PostgreSQL database', () => {
  let pg: TestPostgres
  let url: string
  const instances: Instance[] = []
  const sockets: RelaySocket[] = []

  async function start(skewMs: number): Promise<Instance> {
    const dir = tempDataDir()
    const sign = skewMs === 0 ? '' : skewMs > 0 ? `+${skewMs / 1000}s` : `${skewMs / 1000}s`
    const prefix = skewMs === 0 ? [] : [faketime as string, '-f', sign]
    const relay = await startBinary(
      dir,
      {
        RELAY_DATABASE_URL: url,
        RELAY_WS_MAX_CONNECTIONS: String(LIMIT),
        RELAY_RATE_POLL_PER_MIN: '0',
        RELAY_RATE_SEND_PER_MIN: '0',
        // timers and timeouts keep the real pace; only the wall clock is off
        FAKETIME_DONT_FAKE_MONOTONIC: '1',
      },
      prefix,
    )
    const instance = { relay, skewMs, dir }
    instances.push(instance)
    return instance
  }

  const client = (i: Instance, keys: KeyPair = generateKeyPair()) =>
    new RelayClient({ baseUrl: i.relay.url, keys, now: () => Date.now() + i.skewMs, rateLimitRetry: false })

  /** A socket for `keys` on `i`, or the error that refused it. */
  async function connect(i: Instance, keys: KeyPair): Promise<RelaySocket | Error> {
    try {
      const s = await client(i, keys).connect()
      sockets.push(s)
      return s
    } catch (err) {
      return err as Error
    }
  }

  /** A recipient with an open inbox, listening on `i`; what it is pushed lands in `got`. */
  async function listener(i: Instance) {
    const keys = generateKeyPair()
    await client(i, keys).updateProfile({ inbox_policy: 'open' })
    const got: MessageJson[] = []
    const s = await client(i, keys).connect()
    sockets.push(s)
    s.onMessage = (m) => void got.push(m)
    return { keys, got }
  }

  /** Every instance sends to every listener; each listener gets every message once. */
  async function everyMessageReachesEveryListener(tag: string) {
    const listeners = await Promise.all(instances.map((i) => listener(i)))
    const sent = new Map<string, string[]>()
    for (const l of listeners) sent.set(l.keys.publicKey, [])
    for (const via of instances) {
      const sender = client(via)
      for (const l of listeners) {
        for (let n = 0; n < 3; n++) {
          const { message_id } = await sender.send({ recipient_key: l.keys.publicKey, body: { tag, n } })
          sent.get(l.keys.publicKey)!.push(message_id)
        }
      }
    }
    for (const l of listeners) {
      const ids = sent.get(l.keys.publicKey)!
      await until(() => ids.every((id) => l.got.some((m) => m.message_id === id)), 15_000, `${ids.length} pushes`)
      expect(l.got.map((m) => m.message_id).filter((id) => ids.includes(id)).sort()).toEqual([...ids].sort())
    }
  }

  /** Opens LIMIT sockets for `keys`, one on each of `on`; `open()` says whether they all still are. */
  async function atLimit(keys: KeyPair, on: Instance[]) {
    let closed = 0
    for (const i of on) {
      const s = await connect(i, keys)
      expect(s).not.toBeInstanceOf(Error)
      void (s as RelaySocket).closed.then(() => closed++)
    }
    return { open: () => closed === 0 }
  }

  /** With LIMIT sockets open for `keys`, one more is refused on every instance. */
  async function limitHolds(keys: KeyPair) {
    for (const i of instances) {
      const extra = await connect(i, keys)
      if (!(extra instanceof Error)) extra.close()
      expect({ instance: i.skewMs, refused: extra instanceof Error }).toEqual({ instance: i.skewMs, refused: true })
    }
  }

  beforeAll(async () => {
    pg = await startPostgres(pgBin as string)
    url = await pg.createDatabase('clock')
    await start(0) // migrates
    await Promise.all([start(-SKEW_MS), start(SKEW_MS)])
  }, 120_000)

  afterAll(async () => {
    for (const s of sockets) s.close()
    await Promise.all(instances.map((i) => i.relay.stop().catch(() => 0)))
    for (const i of instances) rmSync(i.dir, { recursive: true, force: true })
    await pg?.remove()
  }, 60_000)

  test('40 s apart: the per-agent socket limit holds across the instances, then and after many heartbeats; every message reaches every listener', async () => {
    const [normal, behind, ahead] = instances
    const keys = generateKeyPair()
    // one socket on the instance behind, one on the instance ahead: the agent is at its limit
    const held = await atLimit(keys, [behind, ahead])
    await limitHolds(keys)
    // past three heartbeats on every clock: no instance judges another's sockets dead, none clears them
    await Bun.sleep(17_000)
    await limitHolds(keys)
    expect(held.open()).toBe(true)
    expect(normal.relay.proc.exitCode).toBeNull()
    await everyMessageReachesEveryListener('skewed')
  }, 90_000)

  test('PostgreSQL down longer than three heartbeats, then back: the limit still holds on every instance, and messages flow', async () => {
    const keys = generateKeyPair()
    const [normal, behind] = instances
    const held = await atLimit(keys, [normal, behind])
    await limitHolds(keys)
    await pg.stop()
    await Bun.sleep(17_000)
    await pg.start()
    // from the moment the database is back (instances reconnecting, heartbeats catching up) until every
    // instance is ready and has beaten again: no instance ever lets a third socket in
    const admitted: number[] = []
    const watchUntil = Date.now() + 12_000
    while (Date.now() < watchUntil) {
      for (const i of instances) {
        const extra = await connect(i, keys)
        if (!(extra instanceof Error)) {
          admitted.push(i.skewMs)
          extra.close()
        }
      }
      await Bun.sleep(50)
    }
    expect(admitted).toEqual([])
    for (const i of instances) {
      await until(async () => (await fetch(`${i.relay.url}/v1/health/ready`).catch(() => null))?.status === 200, 30_000, 'ready again')
    }
    // and once every instance has had time to judge lapsed heartbeats again
    await limitHolds(keys)
    await Bun.sleep(17_000)
    await limitHolds(keys)
    // the agent's sockets lived through it all
    expect(held.open()).toBe(true)
    await everyMessageReachesEveryListener('restarted')
  }, 120_000)
})
