/**
 * Stalled bodies, short: 24 connections from 5 addresses each declare a 2 MiB JSON body with
 * well-formed headers and a garbage signature and send one byte, while legitimate agents on other
 * addresses keep sending signed messages. The bound: at least 99 % of the legitimate sends answer 201.
 * Budgets count bytes received, not declared: each stalled body holds one byte. With the declared 2 MiB
 * held at once, 24 of them filled the relay-wide budget and every legitimate send got 503.
 */
import { afterEach, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { generateKeyPair, signRequest } from '../../src/auth/sign.ts'
import { startTestRelay, type TestRelay } from '../support/harness.ts'
import { RawConnection, head } from './raw-http.ts'

const MiB = 1024 * 1024
let open: TestRelay[] = []
let conns: RawConnection[] = []
afterEach(async () => {
  for (const c of conns) c.destroy()
  conns = []
  for (const t of open) await t.close()
  open = []
})

test('24 stalled 2 MiB bodies from 5 addresses: legitimate signed sends keep answering 201', async () => {
  const t = await startTestRelay({ host: '127.0.0.1', rateLimits: { addressExempt: '', sendPerMin: 0 } })
  open.push(t)
  const { port } = await t.relay.start()
  for (let i = 0; i < 24; i++) {
    const c = await RawConnection.open(port, `127.0.20.${1 + (i % 5)}`)
    conns.push(c)
    const forged = {
      'X-M2M-Public-Key': randomBytes(32).toString('base64url'),
      'X-M2M-Timestamp': new Date(t.clock.now()).toISOString(),
      'X-M2M-Signature': randomBytes(64).toString('base64url'),
    }
    await c.write(head('POST', '/v1/messages', { ...forged, 'Content-Type': 'application/json', 'Content-Length': 2 * MiB }) + '{')
  }
  const agents = Array.from({ length: 4 }, () => generateKeyPair())
  let ok = 0
  const n = 100
  for (let i = 0; i < n; i++) {
    const from = agents[i % agents.length]
    const body = JSON.stringify({ recipient_key: agents[(i + 1) % agents.length].publicKey, body: { i } })
    const c = await RawConnection.open(port, `127.0.21.${1 + (i % 4)}`)
    await c.write(head('POST', '/v1/messages', { ...signRequest(from, 'POST', '/v1/messages', body, new Date(t.clock.now()).toISOString()), 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) }) + body)
    if ((await c.answer()).status === 201) ok++
    c.destroy()
  }
  expect(ok).toBeGreaterThanOrEqual(99)
}, 30_000)
