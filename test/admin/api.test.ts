/** /v1/admin: only RELAY_ADMIN_KEYS may call it; every endpoint, its errors, suspension reaching sockets and requests. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { generateKeyPair } from '../../src/auth/sign.ts'
import type { RelayClient } from '../../src/client/index.ts'
import { ConfigError, loadConfig } from '../../src/config/load.ts'
import { BASE_URL, expectError, startTestRelay, type TestRelay } from '../support/harness.ts'
import { WsProbe } from '../support/ws.ts'

const adminKeys = generateKeyPair()
let t: TestRelay
let admin: RelayClient
let wsUrl: string

const api = async (client: RelayClient, method: string, path: string, body?: unknown) => client.transport.send(method, path, body)
const ok = async (res: Response, status = 200) => {
  const text = await res.text()
  expect([res.status, text]).toEqual([status, text])
  return text ? JSON.parse(text) : null
}

const ENDPOINTS: [string, string, unknown?][] = [
  ['GET', '/v1/admin/stats'],
  ['GET', '/v1/admin/agents'],
  ['POST', `/v1/admin/agents/${generateKeyPair().publicKey}/suspend`, { reason: 'x' }],
  ['POST', `/v1/admin/agents/${generateKeyPair().publicKey}/unsuspend`],
  ['GET', '/v1/admin/admission'],
  ['POST', '/v1/admin/admission', { public_key: generateKeyPair().publicKey }],
  ['DELETE', `/v1/admin/admission/${generateKeyPair().publicKey}`],
  ['GET', '/v1/admin/webhooks'],
  ['GET', '/v1/admin/errors'],
]

beforeAll(async () => {
  t = await startTestRelay({ host: '127.0.0.1', admin: { keys: [adminKeys.publicKey] } })
  const { port } = await t.relay.start()
  wsUrl = `ws://127.0.0.1:${port}/v1/ws`
  admin = t.client(adminKeys)
})
afterAll(() => t.close())

describe('who may call it', () => {
  test('every endpoint answers 403 forbidden to a key that is not listed, and changes nothing', async () => {
    const other = t.client()
    for (const [method, path, body] of ENDPOINTS) {
      const err = await expectError(await api(other, method, path, body), 403, 'forbidden')
      expect(err.message).toContain('RELAY_ADMIN_KEYS')
    }
    expect((await ok(await api(admin, 'GET', '/v1/admin/admission'))).allowed).toEqual([])
    expect((await ok(await api(admin, 'GET', '/v1/admin/agents?status=suspended'))).agents).toEqual([])
  })

  test('unsigned and badly signed requests are refused before the key is looked at', async () => {
    await expectError(await t.handle(new Request(BASE_URL + '/v1/admin/stats')), 401, 'unauthorized')
    const req = admin.transport.buildRequest('GET', '/v1/admin/stats')
    req.headers.set('X-M2M-Signature', req.headers.get('X-M2M-Signature')!.replace(/^./, (c) => (c === 'A' ? 'B' : 'A')))
    await expectError(await t.handle(req), 401, 'invalid_signature')
  })

  test('a relay without admin keys refuses everyone', async () => {
    const plain = await startTestRelay()
    try {
      await expectError(await plain.client(adminKeys).transport.send('GET', '/v1/admin/stats'), 403, 'forbidden')
    } finally {
      await plain.close()
    }
  })

  test('RELAY_ADMIN_KEYS is a validated comma-separated list of keys', async () => {
    const other = generateKeyPair().publicKey
    const c = await loadConfig({ env: { RELAY_ADMIN_KEYS: ` ${adminKeys.publicKey}, ${other},,${other}` }, cwd: '/' })
    expect(c.admin.keys).toEqual([adminKeys.publicKey, other])
    expect((await loadConfig({ env: {}, cwd: '/' })).admin.keys).toEqual([])
    const bad = loadConfig({ env: { RELAY_ADMIN_KEYS: `${adminKeys.publicKey},not-a-key` }, cwd: '/' })
    await expect(bad).rejects.toBeInstanceOf(ConfigError)
    await expect(bad).rejects.toThrow(/RELAY_ADMIN_KEYS: "not-a-key" is not a public key/)
  })
})

describe('agents and suspension', () => {
  test('stats count agents by status', async () => {
    const s = await ok(await api(admin, 'GET', '/v1/admin/stats'))
    expect(Object.keys(s).sort()).toEqual(['agents', 'blobs', 'database', 'messages', 'webhooks'])
    expect(s.agents.total).toBe(s.agents.active + s.agents.suspended)
    expect(s.agents.total).toBeGreaterThanOrEqual(1)
  })

  test('the listing pages in creation order and filters by status; bad parameters are 400', async () => {
    const keys: string[] = []
    for (let i = 0; i < 3; i++) {
      t.clock.advance(1000)
      const c = t.client()
      await c.updateProfile({ display_name: `listed ${i}` })
      keys.push(c.publicKey)
    }
    const seen: string[] = []
    let cursor: string | null = null
    do {
      const page: any = await ok(await api(admin, 'GET', `/v1/admin/agents?limit=2${cursor ? `&cursor=${cursor}` : ''}`))
      expect(page.agents.length).toBeLessThanOrEqual(2)
      seen.push(...page.agents.map((a: any) => a.public_key))
      cursor = page.next_cursor
    } while (cursor)
    expect(seen.slice(-3)).toEqual(keys)
    const entry = (await ok(await api(admin, 'GET', '/v1/admin/agents?status=active&limit=100'))).agents.find((a: any) => a.public_key === keys[0])
    expect(entry).toMatchObject({ display_name: 'listed 0', status: 'active', visibility: 'private', inbox_policy: 'blocklist', capabilities: 0 })
    await expectError(await api(admin, 'GET', '/v1/admin/agents?status=gone'), 400, 'bad_request')
    await expectError(await api(admin, 'GET', '/v1/admin/agents?limit=0'), 400, 'bad_request')
    await expectError(await api(admin, 'GET', '/v1/admin/agents?cursor=nope'), 400, 'bad_request')
    await expectError(await api(admin, 'GET', '/v1/admin/agents?status=active&status=suspended'), 400, 'bad_request')
  })

  test('suspend closes the agent’s sockets (4003) and refuses its requests; unsuspend lets it back', async () => {
    const keys = generateKeyPair()
    const agent = t.client(keys)
    await agent.getAgent()
    const socket = await WsProbe.authed(t, wsUrl, keys)
    const suspended = await ok(await api(admin, 'POST', `/v1/admin/agents/${keys.publicKey}/suspend`, { reason: 'spam' }))
    expect(suspended).toMatchObject({ public_key: keys.publicKey, status: 'suspended', suspended_reason: 'spam' })
    expect((await socket.waitClosed()).code).toBe(4003)
    await expectError(await agent.transport.send('GET', `/v1/agents/${keys.publicKey}`), 403, 'agent_suspended')
    // and messages to it are refused
    await expectError(await t.client().transport.send('POST', '/v1/messages', { recipient_key: keys.publicKey, body: 'hi' }), 403, 'forbidden')
    const listed = await ok(await api(admin, 'GET', '/v1/admin/agents?status=suspended'))
    expect(listed.agents.map((a: any) => a.public_key)).toContain(keys.publicKey)
    expect((await ok(await api(admin, 'POST', `/v1/admin/agents/${keys.publicKey}/unsuspend`))).status).toBe('active')
    expect((await agent.getAgent()).status).toBe('active')
  })

  test('suspending an unknown key blocks it for good; unsuspending an unknown key is 404', async () => {
    const stranger = generateKeyPair()
    expect((await ok(await api(admin, 'POST', `/v1/admin/agents/${stranger.publicKey}/suspend`))).status).toBe('suspended')
    await expectError(await t.client(stranger).transport.send('GET', '/v1/agents/me'), 403, 'agent_suspended')
    await expectError(await api(admin, 'POST', `/v1/admin/agents/${generateKeyPair().publicKey}/unsuspend`), 404, 'agent_not_found')
  })

  test('bad keys and bodies are 400', async () => {
    const key = generateKeyPair().publicKey
    await expectError(await api(admin, 'POST', '/v1/admin/agents/not-a-key/suspend'), 400, 'bad_request')
    await expectError(await api(admin, 'POST', `/v1/admin/agents/${key}/suspend`, { reason: 5 }), 400, 'bad_request')
    await expectError(await api(admin, 'POST', `/v1/admin/agents/${key}/suspend`, { reason: 'x'.repeat(501) }), 400, 'bad_request')
    await expectError(await api(admin, 'POST', `/v1/admin/agents/${key}/suspend`, [1]), 400, 'bad_request')
  })

  test('operator keys cannot be suspended over the API (no lock-out), themselves or each other; the host still can', async () => {
    const [self, other] = [generateKeyPair(), generateKeyPair()]
    const r = await startTestRelay({ admin: { keys: [self.publicKey, other.publicKey] } })
    try {
      const c = r.client(self)
      for (const key of [self.publicKey, other.publicKey]) {
        const e = await expectError(await c.transport.send('POST', `/v1/admin/agents/${key}/suspend`, { reason: 'oops' }), 403, 'forbidden')
        expect(e.message).toContain('RELAY_ADMIN_KEYS')
      }
      expect((await ok(await c.transport.send('GET', '/v1/admin/stats'))).agents).toBeDefined()
      expect((await r.relay.storage.agents.find(other.publicKey))?.status ?? 'none').not.toBe('suspended')
      // an ordinary agent is still suspended over the API
      const plain = generateKeyPair().publicKey
      expect((await ok(await c.transport.send('POST', `/v1/admin/agents/${plain}/suspend`))).status).toBe('suspended')
      // from the host (relay admin suspend) an operator key can be suspended
      await r.relay.services.agents.suspend(other.publicKey, 'host')
      await expectError(await r.client(other).transport.send('GET', '/v1/admin/stats'), 403, 'agent_suspended')
    } finally {
      await r.close()
    }
  })
})

describe('admission allowlist', () => {
  test('allow (201, then 200), list, revoke (204, then 404)', async () => {
    const key = generateKeyPair().publicKey
    const first = await ok(await api(admin, 'POST', '/v1/admin/admission', { public_key: key, note: 'ci' }), 201)
    expect(first).toMatchObject({ added: true, entry: { public_key: key, note: 'ci' } })
    expect((await ok(await api(admin, 'POST', '/v1/admin/admission', { public_key: key }))).added).toBe(false)
    const list = await ok(await api(admin, 'GET', '/v1/admin/admission'))
    expect(list.allowed.map((e: any) => e.public_key)).toContain(key)
    expect(await ok(await api(admin, 'DELETE', `/v1/admin/admission/${key}`), 204)).toBeNull()
    await expectError(await api(admin, 'DELETE', `/v1/admin/admission/${key}`), 404, 'not_found')
    await expectError(await api(admin, 'POST', '/v1/admin/admission', { public_key: 'nope' }), 400, 'bad_request')
    // unknown fields are ignored, as on every endpoint
    expect((await ok(await api(admin, 'POST', '/v1/admin/admission', { public_key: key, extra: 1 }), 201)).added).toBe(true)
    await expectError(await api(admin, 'DELETE', '/v1/admin/admission/nope'), 400, 'bad_request')
  })

  test('under RELAY_ADMISSION=allowlist admin keys are always admitted; the keys they allow get in at once', async () => {
    const boss = generateKeyPair()
    const r = await startTestRelay({ admission: { mode: 'allowlist' }, admin: { keys: [boss.publicKey] } })
    try {
      const newcomer = generateKeyPair()
      await expectError(await r.client(newcomer).transport.send('GET', '/v1/agents/me'), 403, 'forbidden')
      expect((await r.client(boss).getAgent()).public_key).toBe(boss.publicKey)
      await ok(await r.client(boss).transport.send('POST', '/v1/admin/admission', { public_key: newcomer.publicKey }), 201)
      expect((await r.client(newcomer).getAgent()).public_key).toBe(newcomer.publicKey)
      await ok(await r.client(boss).transport.send('DELETE', `/v1/admin/admission/${newcomer.publicKey}`), 204)
      await expectError(await r.client(newcomer).transport.send('GET', '/v1/agents/me'), 403, 'forbidden')
    } finally {
      await r.close()
    }
  })

  test('under RELAY_ADMISSION=existing and a full agent cap, an admin key still gets in', async () => {
    const boss = generateKeyPair()
    const r = await startTestRelay({ admission: { mode: 'existing', maxAgents: 1 }, admin: { keys: [boss.publicKey] } })
    try {
      expect((await r.client(boss).getAgent()).public_key).toBe(boss.publicKey)
      await expectError(await r.client().transport.send('GET', '/v1/agents/me'), 403, 'forbidden')
    } finally {
      await r.close()
    }
  })
})

describe('webhook queue and recent errors', () => {
  test('the queue lists pending and in-flight deliveries, soonest due first', async () => {
    const now = t.clock.now()
    const key = generateKeyPair().publicKey
    await t.sql(`INSERT INTO webhooks (public_key, url, secret, enabled, created_at, updated_at) VALUES (?, 'https://example.invalid/h', 's', TRUE, ?, ?)`, [key, now, now])
    const row = (id: string, state: string, next: number, err: string | null) =>
      t.sql(`INSERT INTO webhook_deliveries (delivery_id, public_key, message_id, state, attempts, next_attempt_at, last_error, created_at, updated_at) VALUES (?, ?, ?, ?, 2, ?, ?, ?, ?)`, [id, key, `msg_${id}`, state, next, err, now, now])
    await row('dlv_b', 'pending', now + 60_000, 'HTTP 500')
    await row('dlv_a', 'in_flight', now + 1000, null)
    await row('dlv_c', 'succeeded', now, null)
    const q = await ok(await api(admin, 'GET', '/v1/admin/webhooks'))
    expect(q.pending_deliveries).toBe(2)
    expect(q.deliveries.map((d: any) => [d.delivery_id, d.state, d.last_error])).toEqual([
      ['dlv_a', 'in_flight', null],
      ['dlv_b', 'pending', 'HTTP 500'],
    ])
    expect(q.deliveries[1]).toMatchObject({ public_key: key, message_id: 'msg_dlv_b', attempts: 2, next_attempt_at: new Date(now + 60_000).toISOString() })
    expect((await ok(await api(admin, 'GET', '/v1/admin/webhooks?limit=1'))).deliveries).toHaveLength(1)
    await expectError(await api(admin, 'GET', '/v1/admin/webhooks?limit=5000'), 400, 'bad_request')
  })

  test('recent errors are the relay’s own warn and error lines, newest first', async () => {
    t.relay.logger.info('not kept')
    t.relay.logger.warn('disk almost full', { free_bytes: 5 })
    t.relay.logger.error('job failed', { job: 'sweep', error: 'x'.repeat(5000) })
    const { errors } = await ok(await api(admin, 'GET', '/v1/admin/errors?limit=2'))
    expect(errors.map((e: any) => [e.level, e.msg])).toEqual([
      ['error', 'job failed'],
      ['warn', 'disk almost full'],
    ])
    expect(errors[1].fields).toEqual({ free_bytes: 5 })
    expect(errors[0].fields.error.length).toBeLessThan(2100)
    expect(Date.parse(errors[0].time)).toBe(t.clock.now())
    await expectError(await api(admin, 'GET', '/v1/admin/errors?limit=abc'), 400, 'bad_request')
  })
})
