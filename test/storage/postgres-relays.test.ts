/**
 * Two whole relays (HTTP, WebSockets, jobs) on one PostgreSQL database, as two instances behind a load
 * balancer: what one accepts reaches sockets on the other, and replays, rate limits and agent removals
 * hold across both.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { rmSync } from 'node:fs'
import { generateKeyPair, type KeyPair } from '../../src/auth/sign.ts'
import { RelayClient } from '../../src/client/index.ts'
import { withOverrides } from '../../src/config/load.ts'
import { FakeClock } from '../../src/lib/clock.ts'
import { silentLogger } from '../../src/lib/logger.ts'
import { createRelay, type Relay } from '../../src/relay.ts'
import { openPostgres } from '../../src/storage/postgres/open-postgres.ts'
import { BASE_URL, tempDir, type TestRelay } from '../support/harness.ts'
import { postgresRunner, sharedPostgres } from '../support/postgres.ts'
import { WsProbe } from '../support/ws.ts'

const bin = postgresRunner('two relays on one PostgreSQL database')

interface Instance {
  relay: Relay
  ws: string
  dataDir: string
  client(keys?: KeyPair, capture?: (req: Request) => void): RelayClient
}

describe.skipIf(bin === null)('two relays on one PostgreSQL database', () => {
  const clock = new FakeClock()
  /** What WsProbe needs of a harness relay: the clock its auth frames are signed with. */
  const signer = { clock } as TestRelay
  let a: Instance
  let b: Instance

  async function instance(url: string): Promise<Instance> {
    const dataDir = tempDir()
    const opened = await openPostgres(url, { logger: silentLogger, clock, lockWaitMs: 2000 })
    const relay = createRelay(withOverrides({ dataDir, host: '127.0.0.1', port: 0, logLevel: 'error' }), { clock, logger: silentLogger, opened })
    const { port } = await relay.start()
    return {
      relay,
      ws: `ws://127.0.0.1:${port}/v1/ws`,
      dataDir,
      client: (keys = generateKeyPair(), capture) =>
        new RelayClient({
          baseUrl: BASE_URL,
          keys,
          now: () => clock.now(),
          rateLimitRetry: false,
          fetch: (req) => {
            capture?.(req.clone() as unknown as Request)
            return relay.handle(req)
          },
        }),
    }
  }

  beforeAll(async () => {
    const url = await (await sharedPostgres(bin as string)).createDatabase('relays')
    a = await instance(url)
    b = await instance(url)
  })

  afterAll(async () => {
    for (const i of [a, b]) {
      if (!i) continue
      await i.relay.stop()
      rmSync(i.dataDir, { recursive: true, force: true })
    }
  })

  test('a message sent through A is pushed to the recipient’s socket on B, once', async () => {
    const bobKeys = generateKeyPair()
    const bob = b.client(bobKeys)
    await bob.updateProfile({ inbox_policy: 'open' })
    const socket = await WsProbe.authed(signer, b.ws, bobKeys)
    const alice = a.client()
    const sent = await alice.send({ recipient_key: bobKeys.publicKey, body: { hello: 'from A' } })
    const pushed = await socket.next('message')
    expect(pushed.message).toMatchObject({ message_id: sent.message_id, body: { hello: 'from A' } })
    expect(await socket.sync()).toEqual([])
    socket.close()
  })

  test('a request replayed to the other instance is refused', async () => {
    let captured: Request | null = null
    const alice = a.client(generateKeyPair(), (req) => (captured = req))
    await alice.updateProfile({ display_name: 'once' })
    const replay = await b.relay.handle(captured as unknown as Request)
    expect(replay.status).toBe(409)
    expect(((await replay.json()) as { error: { code: string } }).error.code).toBe('replay_detected')
  })

  test('the send limit counts the sends of both instances', async () => {
    const keys = generateKeyPair()
    const to = generateKeyPair().publicKey
    const viaA = a.client(keys)
    const viaB = b.client(keys)
    for (let i = 0; i < 30; i++) await (i % 2 ? viaA : viaB).send({ recipient_key: to, body: i })
    const refused = await viaA.send({ recipient_key: to, body: 'one too many' }).catch((err) => err)
    expect(refused.code).toBe('rate_limit_exceeded')
  })

  test('an agent deleted through A loses its socket on B', async () => {
    const keys = generateKeyPair()
    await a.client(keys).updateProfile({ display_name: 'short-lived' })
    const socket = await WsProbe.authed(signer, b.ws, keys)
    await a.client(keys).deleteAgent()
    expect((await socket.waitClosed(5000)).code).toBe(4004)
  })
})
