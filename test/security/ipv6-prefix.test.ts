/**
 * A subscriber rotating through the /64s of its /56 is limited as one client: 100 /64s of one /56,
 * each with a fresh key, against the new-agent limit and the per-address request rate. The addresses
 * reach the relay as a trusted proxy on loopback names them (X-Forwarded-For), over real sockets.
 */
import { afterEach, expect, test } from 'bun:test'
import { generateKeyPair, signRequest } from '../../src/auth/sign.ts'
import type { ConfigOverrides } from '../../src/config/config.ts'
import { startTestRelay, type TestRelay } from '../support/harness.ts'
import { RawConnection, head } from './raw-http.ts'

let open: TestRelay[] = []
afterEach(async () => {
  for (const t of open) await t.close()
  open = []
})

async function behindProxy(rateLimits: ConfigOverrides['rateLimits']) {
  const t = await startTestRelay({ host: '127.0.0.1', trustProxy: '127.0.0.1', rateLimits: { addressExempt: '', ...rateLimits } })
  open.push(t)
  const { port } = await t.relay.start()
  return { t, port }
}

/** A fresh key's signed GET of its own record, from `client` as the proxy names it; the status. */
async function fresh(t: TestRelay, port: number, client: string): Promise<number> {
  const keys = generateKeyPair()
  const path = `/v1/agents/${keys.publicKey}`
  const c = await RawConnection.open(port)
  try {
    await c.write(head('GET', path, { ...signRequest(keys, 'GET', path, '', new Date(t.clock.now()).toISOString()), 'X-Forwarded-For': client }))
    return (await c.answer()).status
  } finally {
    c.destroy()
  }
}

const slash64 = (i: number) => `2001:db8:1:${(0x3400 + i).toString(16)}::${(i % 7) + 1}`

test('100 /64s of one /56 share one new-agent limit; the next /56 has its own', async () => {
  const { t, port } = await behindProxy({ newAgentsPerHour: 20, addressPerMin: 0 })
  const statuses: Record<number, number> = {}
  for (let i = 0; i < 100; i++) {
    const s = await fresh(t, port, slash64(i))
    statuses[s] = (statuses[s] ?? 0) + 1
  }
  expect(statuses).toEqual({ 200: 20, 429: 80 })
  expect(await t.relay.storage.agents.count()).toBe(20)
  expect(await fresh(t, port, '2001:db8:1:3500::1')).toBe(200)
}, 30_000)

test('100 /64s of one /56 share one request rate', async () => {
  const { t, port } = await behindProxy({ newAgentsPerHour: 0, addressPerMin: 30 })
  let limited = 0
  for (let i = 0; i < 100; i++) if ((await fresh(t, port, slash64(i))) === 429) limited++
  expect(limited).toBe(70)
}, 30_000)
