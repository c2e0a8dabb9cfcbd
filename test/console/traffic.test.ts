/**
 * GET /v1/admin/traffic, the data of the operator view's chart: answers per minute over the last hour,
 * with 4xx and 5xx counted apart. Driven in process with a fake clock, so minutes can pass at will;
 * the ring itself is checked directly too (wrapping, gaps, old minutes forgotten).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { TrafficLog } from '../../src/lib/traffic.ts'
import { BASE_URL, expectError, startTestRelay, type TestRelay } from '../support/harness.ts'

const adminKeys = generateKeyPair()
let t: TestRelay
beforeAll(async () => {
  t = await startTestRelay({ admin: { keys: [adminKeys.publicKey] } })
})
afterAll(() => t.close())

const MINUTE = 60_000

describe('the traffic ring', () => {
  test('counts per minute, splits 4xx and 5xx, forgets minutes older than the window', () => {
    const log = new TrafficLog(3)
    const t0 = Date.parse('2026-11-28T10:00:30Z')
    log.record(200, t0)
    log.record(404, t0 + 1000)
    log.record(503, t0 + MINUTE)
    let s = log.series(t0 + MINUTE)
    expect(s).toEqual([
      { minute: '2026-11-28T09:59:00.000Z', requests: 0, client_errors: 0, server_errors: 0 },
      { minute: '2026-11-28T10:00:00.000Z', requests: 2, client_errors: 1, server_errors: 0 },
      { minute: '2026-11-28T10:01:00.000Z', requests: 1, client_errors: 0, server_errors: 1 },
    ])
    // three minutes later the 10:00 bucket is reused for 10:03: the old counts are gone, not added to
    log.record(200, t0 + 3 * MINUTE)
    s = log.series(t0 + 3 * MINUTE)
    expect(s.map((m) => [m.minute.slice(11, 16), m.requests])).toEqual([
      ['10:01', 1],
      ['10:02', 0],
      ['10:03', 1],
    ])
    // an hour of silence: all zeros
    expect(log.series(t0 + 60 * MINUTE).every((m) => m.requests === 0)).toBe(true)
  })
})

describe('GET /v1/admin/traffic', () => {
  test('sixty minutes, oldest first, counting the answers the relay gave, errors apart', async () => {
    const admin = t.client(adminKeys)
    const other = t.client()
    await other.getAgent() // 200 (creates the agent)
    await expectError(await t.handle(new Request(`${BASE_URL}/v1/agents/me`)), 401, 'unauthorized')
    await expectError(await other.transport.send('GET', '/v1/admin/traffic'), 403, 'forbidden')
    await Bun.sleep(20) // the count is taken once the answer has gone out
    t.clock.advance(MINUTE)
    await other.getAgent()
    await Bun.sleep(20)
    const res = await admin.transport.send('GET', '/v1/admin/traffic')
    expect(res.status).toBe(200)
    const { minutes } = (await res.json()) as { minutes: { minute: string; requests: number; client_errors: number; server_errors: number }[] }
    expect(minutes).toHaveLength(60)
    const now = Math.floor(t.clock.now() / MINUTE) * MINUTE
    expect(minutes[59].minute).toBe(new Date(now).toISOString())
    expect(minutes[0].minute).toBe(new Date(now - 59 * MINUTE).toISOString())
    // the minute before: one 200, one 401, one 403; this minute: one 200 (this request is not counted until answered)
    expect(minutes[58]).toMatchObject({ requests: 3, client_errors: 2, server_errors: 0 })
    expect(minutes[59]).toMatchObject({ requests: 1, client_errors: 0, server_errors: 0 })
    expect(minutes.slice(0, 58).every((m) => m.requests === 0)).toBe(true)
  })
})
