/** `relay admin` and /v1/admin are one implementation: the same answers, and changes made by one seen by the other. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { spawnSync } from 'bun'
import { generateKeyPair } from '../../src/auth/sign.ts'
import type { RelayClient } from '../../src/client/index.ts'
import { buildBinary } from '../support/binary.ts'
import { startTestRelay, type TestRelay } from '../support/harness.ts'

const adminKeys = generateKeyPair()
let t: TestRelay
let bin: string
let admin: RelayClient

const cli = (...args: string[]) => {
  const r = spawnSync([bin, 'admin', ...args, '--data-dir', t.dataDir])
  expect([r.exitCode, r.stderr.toString()]).toEqual([0, ''])
  return r.stdout.toString()
}
const get = async (path: string) => {
  const res = await admin.transport.send('GET', path)
  expect(res.status).toBe(200)
  return res.json() as Promise<any>
}

beforeAll(async () => {
  bin = await buildBinary()
  t = await startTestRelay({ admin: { keys: [adminKeys.publicKey] } })
  admin = t.client(adminKeys)
  for (let i = 0; i < 4; i++) {
    t.clock.advance(1000)
    await t.client().updateProfile({ display_name: `agent ${i}`, capabilities: i ? [{ name: 'echo', tags: ['demo'] }] : [] })
  }
  const now = t.clock.now()
  const key = generateKeyPair().publicKey
  t.relay.sqlite!.run(`INSERT INTO webhooks (public_key, url, secret, enabled, created_at, updated_at) VALUES (?, 'https://example.invalid', 's', 1, ?, ?)`, [key, now, now])
  t.relay.sqlite!.run(
    `INSERT INTO webhook_deliveries (delivery_id, public_key, message_id, state, attempts, next_attempt_at, last_error, created_at, updated_at) VALUES ('dlv_1', ?, 'msg_1', 'pending', 1, ?, 'HTTP 502', ?, ?)`,
    [key, now + 5000, now, now],
  )
})
afterAll(() => t.close())

describe('relay admin and /v1/admin give the same answers', () => {
  test('agents, pages and filters', async () => {
    expect(JSON.parse(cli('agents', '--json', '--limit', '3'))).toEqual(await get('/v1/admin/agents?limit=3'))
    const page = await get('/v1/admin/agents?limit=3')
    expect(JSON.parse(cli('agents', '--json', '--limit', '3', '--cursor', page.next_cursor))).toEqual(await get(`/v1/admin/agents?limit=3&cursor=${page.next_cursor}`))
    expect(JSON.parse(cli('agents', '--json', '--status', 'active'))).toEqual(await get('/v1/admin/agents?status=active'))
  })

  test('stats (less the data directory, which only the command prints)', async () => {
    const { data_dir, ...fromCli } = JSON.parse(cli('stats', '--json'))
    expect(data_dir).toBe(t.dataDir)
    const fromApi = await get('/v1/admin/stats')
    // the database figures move as the relay writes; the counts do not
    expect({ ...fromCli, database: null }).toEqual({ ...fromApi, database: null })
  })

  test('the webhook queue', async () => {
    expect(JSON.parse(cli('webhooks', '--json'))).toEqual(await get('/v1/admin/webhooks'))
    expect(cli('webhooks')).toMatch(/^AGENT\s+MESSAGE\s+STATE\s+ATTEMPTS\s+NEXT ATTEMPT\s+LAST ERROR\n\S+\s+msg_1\s+pending\s+1\s+\S+\s+HTTP 502\n$/)
  })

  test('a suspension made by the command shows in the API, and one made by the API in the command', async () => {
    const a = generateKeyPair()
    const b = generateKeyPair()
    await t.client(a).getAgent()
    t.clock.advance(1000)
    await t.client(b).getAgent()
    expect(cli('suspend', a.publicKey, '--reason', 'from the command line')).toBe(`suspended ${a.publicKey}\n`)
    const res = await admin.transport.send('POST', `/v1/admin/agents/${b.publicKey}/suspend`, { reason: 'from the API' })
    expect(res.status).toBe(200)
    const api = (await get('/v1/admin/agents?status=suspended')).agents.map((x: any) => [x.public_key, x.suspended_reason])
    const fromCli = JSON.parse(cli('agents', '--status', 'suspended', '--json')).agents.map((x: any) => [x.public_key, x.suspended_reason])
    expect(api).toEqual(fromCli)
    expect(api).toEqual([
      [a.publicKey, 'from the command line'],
      [b.publicKey, 'from the API'],
    ])
    expect(cli('unsuspend', b.publicKey)).toBe(`unsuspended ${b.publicKey}\n`)
    expect((await get('/v1/admin/agents?status=suspended')).agents.map((x: any) => x.public_key)).toEqual([a.publicKey])
  })

  test('the allowlist', async () => {
    const k = generateKeyPair().publicKey
    cli('allow', k, '--note', 'cli')
    const res = await admin.transport.send('POST', '/v1/admin/admission', { public_key: generateKeyPair().publicKey, note: 'api' })
    expect(res.status).toBe(201)
    expect(JSON.parse(cli('allowed', '--json'))).toEqual(await get('/v1/admin/admission'))
    expect((await get('/v1/admin/admission')).allowed.map((e: any) => e.note).sort()).toEqual(['api', 'cli'])
  })
})
