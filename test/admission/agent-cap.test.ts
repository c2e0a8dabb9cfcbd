/**
 * RELAY_MAX_AGENTS under concurrency: 500 fresh keys at once against a cap of 50 leave exactly 50
 * agent records — on SQLite, and on PostgreSQL with the keys spread over two relays on one database.
 * Every other key gets 403 with the cap in its details.
 */
import { afterAll, describe, expect, test } from 'bun:test'
import { rmSync } from 'node:fs'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { RelayClient } from '../../src/client/index.ts'
import { withOverrides } from '../../src/config/load.ts'
import { FakeClock } from '../../src/lib/clock.ts'
import { silentLogger } from '../../src/lib/logger.ts'
import { createRelay, type Relay } from '../../src/relay.ts'
import { openPostgres } from '../../src/storage/postgres/open-postgres.ts'
import { BASE_URL, startTestRelay, tempDir } from '../support/harness.ts'
import { postgresRunner, sharedPostgres } from '../support/postgres.ts'

const FRESH = 500
const CAP = 50

/** Sends one signed GET per fresh key, all at once; returns the statuses and the 403 details seen. */
async function flood(clients: RelayClient[]) {
  const answers = await Promise.all(clients.map((c) => c.transport.send('GET', `/v1/agents/${c.publicKey}`)))
  const statuses: Record<number, number> = {}
  const details = new Set<string>()
  for (const res of answers) {
    statuses[res.status] = (statuses[res.status] ?? 0) + 1
    const body = (await res.json()) as { error?: { details?: unknown } }
    if (res.status === 403) details.add(JSON.stringify(body.error?.details))
  }
  return { statuses, details: [...details] }
}

test(`SQLite: ${FRESH} concurrent fresh keys under a cap of ${CAP} make exactly ${CAP} agents`, async () => {
  const t = await startTestRelay({ admission: { maxAgents: CAP } })
  try {
    const { statuses, details } = await flood(Array.from({ length: FRESH }, () => t.client()))
    expect(statuses).toEqual({ 200: CAP, 403: FRESH - CAP })
    expect(details).toEqual([JSON.stringify({ max_agents: CAP })])
    expect(await t.relay.storage.agents.count()).toBe(CAP)
    // operator keys are never counted against the cap
    const admin = generateKeyPair()
    const t2 = await startTestRelay({ admission: { maxAgents: 1 }, admin: { keys: [admin.publicKey] } } as never)
    try {
      await t2.client().getAgent()
      expect((await t2.client(admin).getAgent()).public_key).toBe(admin.publicKey)
      expect(await t2.relay.storage.agents.count()).toBe(2)
    } finally {
      await t2.close()
    }
  } finally {
    await t.close()
  }
}, 60_000)

const bin = postgresRunner('the agent cap on PostgreSQL')

describe.skipIf(bin === null)('PostgreSQL, two relays on one database', () => {
  const relays: { relay: Relay; dataDir: string }[] = []
  afterAll(async () => {
    for (const r of relays) {
      await r.relay.stop()
      rmSync(r.dataDir, { recursive: true, force: true })
    }
  })

  test(`${FRESH} concurrent fresh keys over both under a cap of ${CAP} make exactly ${CAP} agents`, async () => {
    const url = await (await sharedPostgres(bin as string)).createDatabase('agentcap')
    const clock = new FakeClock()
    for (let i = 0; i < 2; i++) {
      const dataDir = tempDir()
      const opened = await openPostgres(url, { logger: silentLogger, clock, lockWaitMs: 10_000 })
      const relay = createRelay(withOverrides({ dataDir, host: '127.0.0.1', port: 0, logLevel: 'error', admission: { mode: 'open', maxAgents: CAP } }), {
        clock,
        logger: silentLogger,
        opened,
      })
      relays.push({ relay, dataDir })
    }
    const clients = Array.from(
      { length: FRESH },
      (_, i) => new RelayClient({ baseUrl: BASE_URL, keys: generateKeyPair(), now: () => clock.now(), rateLimitRetry: false, fetch: (req) => relays[i % 2].relay.handle(req) }),
    )
    const { statuses } = await flood(clients)
    expect(statuses).toEqual({ 200: CAP, 403: FRESH - CAP })
    expect(await relays[0].relay.storage.agents.count()).toBe(CAP)
  }, 120_000)
})
