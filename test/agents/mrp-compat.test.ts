/**
 * MRP wire details: `null` for nullable fields, capabilities given as plain strings, `/v1/agents/me`,
 * X-RateLimit-* on every authenticated answer, and GET /v1/health/live.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { BASE_URL, expectError, startTestRelay, type TestRelay } from '../support/harness.ts'
import { WsProbe } from '../support/ws.ts'
import { agent, rawGet, rawSend } from '../messages/helpers.ts'

let t: TestRelay
beforeAll(async () => {
  t = await startTestRelay({ rateLimits: { sendPerMin: 0, pollPerMin: 0, requestsPerMin: 0 } })
})
afterAll(() => t.close())

describe('null is absent on send', () => {
  const nulls = { thread_id: null, in_reply_to: null, metadata: null, attachments: null, content_type: null, expires_in: null }
  test('over HTTP: defaults apply and the message reads back with attachments [] and the others null', async () => {
    const a = await agent(t)
    const res = await rawSend(a, { recipient_key: a.publicKey, body: { x: 1 }, ...nulls })
    expect(res.status).toBe(201)
    const sent: any = await res.json()
    expect(Date.parse(sent.expires_at) - Date.parse(sent.created_at)).toBe(604_800_000)
    const m: any = await a.getMessage(sent.message_id)
    expect(m.content_type).toBe('application/json')
    expect(m.attachments).toEqual([])
    for (const k of ['thread_id', 'in_reply_to', 'metadata']) expect(m[k]).toBeNull()
  })
  test('over a WebSocket send frame', async () => {
    const a = await agent(t)
    const { url } = await t.relay.start()
    const ws = await WsProbe.authed(t, url.replace('http', 'ws') + '/v1/ws', a.transport.keys)
    try {
      ws.send({ type: 'send', id: 'n1', message: { recipient_key: a.publicKey, body: 'hi', ...nulls } })
      const result = await ws.next('send_result')
      expect(result.status).toBe('sent')
    } finally {
      ws.close()
    }
  })
  test('null recipient_key is still required; a null body with no attachments is no content', async () => {
    const a = await agent(t)
    const e1 = await expectError(await rawSend(a, { recipient_key: null, body: 1 }), 400, 'bad_request')
    expect(e1.details.fields.recipient_key).toBeString()
    await expectError(await rawSend(a, { recipient_key: a.publicKey, body: null, attachments: null }), 422, 'unprocessable_entity')
  })
})

describe('null in a profile PATCH', () => {
  test('display_name null clears it; null visibility, inbox_policy, metadata, capabilities leave them unchanged', async () => {
    const a = await agent(t, { display_name: 'Ann', visibility: 'public', inbox_policy: 'open', metadata: { k: 1 }, capabilities: [{ name: 'c', tags: ['t'] }] })
    const after = await a.updateProfile({ display_name: null, visibility: null, inbox_policy: null, metadata: null, capabilities: null } as any)
    expect(after.display_name).toBeNull()
    expect(after.visibility).toBe('public')
    expect(after.inbox_policy).toBe('open')
    expect(after.metadata).toEqual({ k: 1 })
    expect(after.capabilities).toEqual([{ name: 'c', tags: ['t'] }])
    const cleared = await a.updateProfile({ metadata: {}, capabilities: [] })
    expect(cleared.metadata).toEqual({})
    expect(cleared.capabilities).toEqual([])
  })
})

describe('capabilities given as plain strings', () => {
  test('become capabilities named and (when a valid tag) tagged by the string, lower-cased', async () => {
    const a = await agent(t)
    const res = await a.transport.send('PATCH', '/v1/agents/me', {
      visibility: 'public',
      capabilities: ['translate', 'Code-Review', 'text summarization', { name: 'obj', tags: ['X'] }],
    })
    expect(res.status).toBe(200)
    const p: any = await res.json()
    expect(p.capabilities).toEqual([
      { name: 'translate', tags: ['translate'] },
      { name: 'Code-Review', tags: ['code-review'] },
      { name: 'text summarization' },
      { name: 'obj', tags: ['x'] },
    ])
    const found = await a.discover({ tag: ['code-review'] })
    expect(found.agents.map((x) => x.public_key)).toContain(a.publicKey)
    const byText = await a.discover({ q: 'summarization' })
    expect(byText.agents.map((x) => x.public_key)).toContain(a.publicKey)
  })
  test('an empty, too long or duplicate string is refused naming the entry', async () => {
    const a = await agent(t)
    const bad = async (capabilities: unknown[], field: string) => {
      const err = await expectError(await a.transport.send('PATCH', '/v1/agents/me', { capabilities }), 400, 'bad_request')
      expect(Object.keys(err.details.fields)).toContain(field)
    }
    await bad(['ok', ''], 'capabilities[1]')
    await bad(['x'.repeat(129)], 'capabilities[0]')
    await bad(['same', 'same'], 'capabilities[1].name')
    await bad([7], 'capabilities[0]')
  })
})

describe('/v1/agents/me is the caller', () => {
  test('profile, capabilities, ACL and webhook', async () => {
    const a = await agent(t)
    const peer = generateKeyPair().publicKey
    const me: any = await (await a.transport.send('GET', '/v1/agents/me')).json()
    expect(me.public_key).toBe(a.publicKey)
    expect(((await (await a.transport.send('PATCH', '/v1/agents/me', { display_name: 'Me' })).json()) as any).display_name).toBe('Me')
    expect((await a.getAgent()).display_name).toBe('Me')
    expect((await a.transport.send('GET', '/v1/agents/me/capabilities')).status).toBe(200)
    expect((await a.transport.send('PUT', `/v1/agents/me/acl/${peer}`, { entry_type: 'block' })).status).toBe(201)
    expect((await a.transport.send('GET', `/v1/agents/me/acl/${peer}`)).status).toBe(200)
    const list: any = await (await a.transport.send('GET', '/v1/agents/me/acl')).json()
    expect(list.map((e: any) => e.owner_key)).toEqual([a.publicKey])
    expect((await a.transport.send('DELETE', `/v1/agents/me/acl/${peer}`)).status).toBe(204)
    await expectError(await a.transport.send('GET', '/v1/agents/me/webhook'), 404, 'not_found')
    const hook = await a.transport.send('PUT', '/v1/agents/me/webhook', { url: 'https://example.com/hook', secret: Buffer.alloc(32, 7).toString('base64url') })
    expect(hook.status).toBe(200)
    expect((await a.transport.send('DELETE', '/v1/agents/me/webhook')).status).toBe(204)
    expect((await a.transport.send('DELETE', '/v1/agents/me')).status).toBe(204)
    await expectError(await a.transport.send('GET', `/v1/agents/${generateKeyPair().publicKey}`), 404, 'agent_not_found')
  })
  test('a path key that is neither a key nor "me" is a 400 naming publicKey', async () => {
    const a = await agent(t)
    for (const key of ['ME', 'xyz', 'A'.repeat(44), 'me2']) {
      const err = await expectError(await a.transport.send('GET', `/v1/agents/${key}`), 400, 'bad_request')
      expect(err.details.fields.publicKey).toContain('"me"')
    }
  })
  test('unsigned, /v1/agents/me is 401 like any other agent path', async () => {
    await expectError(await t.handle(new Request(BASE_URL + '/v1/agents/me')), 401, 'unauthorized')
  })
})

describe('X-RateLimit-* on every authenticated answer', () => {
  let r: TestRelay
  beforeAll(async () => {
    r = await startTestRelay({ rateLimits: { sendPerMin: 5, pollPerMin: 7, requestsPerMin: 20 } })
  })
  afterAll(() => r.close())
  const limitOf = (res: Response) => [res.headers.get('x-ratelimit-limit'), res.headers.get('x-ratelimit-remaining'), res.headers.get('x-ratelimit-reset')]

  test('successes and errors of every route report their window; sends and polls their own', async () => {
    const a = r.client()
    const checks: [string, string, unknown, number, string][] = [
      ['GET', '/v1/agents/me', undefined, 200, '20'],
      ['GET', `/v1/agents/${generateKeyPair().publicKey}`, undefined, 404, '20'],
      ['PATCH', '/v1/agents/me', { visibility: 'nope' }, 400, '20'],
      ['GET', '/v1/discover?tag=x', undefined, 200, '20'],
      ['GET', '/v1/capabilities', undefined, 200, '20'],
      ['GET', '/v1/agents/me/acl', undefined, 200, '20'],
      ['GET', '/v1/agents/me/webhook', undefined, 404, '20'],
      ['GET', '/v1/messages/msg_1_000000000000', undefined, 404, '20'],
      ['GET', '/v1/messages/%ff', undefined, 400, '20'],
      ['GET', '/v1/blobs/blob_000000000000000000000000', undefined, 404, '20'],
      ['POST', '/v1/messages', { recipient_key: a.publicKey, body: 1 }, 201, '5'],
      ['GET', '/v1/messages', undefined, 200, '7'],
    ]
    for (const [method, path, body, status, limit] of checks) {
      const res = await a.transport.send(method, path, body)
      expect([method, path, res.status]).toEqual([method, path, status])
      const [l, remaining, reset] = limitOf(res)
      expect([path, l]).toEqual([path, limit])
      expect(Number(remaining)).toBeGreaterThanOrEqual(0)
      expect(Number(reset)).toBeGreaterThanOrEqual(Math.floor(r.clock.now() / 1000))
    }
  })
  test('a blob upload counts once its signature is verified', async () => {
    const a = r.client()
    await a.getAgent()
    const res = await a.transport.send('POST', '/v1/blobs', new Uint8Array([1, 2, 3]), { 'content-type': 'application/octet-stream' })
    expect(res.status).toBe(201)
    expect(limitOf(res)[0]).toBe('20')
    expect(limitOf(res)[1]).toBe('18')
  })
  test('an upload refused once verified (over the quota, a bad parameter) carries them too; an unverified one not', async () => {
    const small = await startTestRelay({ rateLimits: { requestsPerMin: 20 }, blobs: { quotaBytes: 4 } })
    try {
      const a = small.client()
      const over = await a.transport.send('POST', '/v1/blobs', new Uint8Array(10), { 'content-type': 'application/octet-stream' })
      await expectError(over, 507, 'insufficient_storage')
      expect(limitOf(over).slice(0, 2)).toEqual(['20', '19'])
      const param = await a.transport.send('POST', '/v1/blobs?x=%ff', new Uint8Array(1))
      await expectError(param, 400, 'bad_request')
      expect(limitOf(param).slice(0, 2)).toEqual(['20', '18'])
      const req = a.transport.buildRequest('POST', '/v1/blobs', new Uint8Array(1))
      req.headers.set('x-m2m-signature', req.headers.get('x-m2m-signature')!.replace(/^./, (c) => (c === 'A' ? 'B' : 'A')))
      const bad = await small.handle(req)
      await expectError(bad, 401, 'invalid_signature')
      expect(limitOf(bad)[0]).toBeNull()
    } finally {
      await small.close()
    }
  })
  test('beyond the general limit: 429 with Retry-After; the window frees after a minute', async () => {
    const a = r.client()
    for (let i = 0; i < 20; i++) expect((await rawGet(a, '/v1/agents/me')).status).toBe(200)
    const refused = await rawGet(a, '/v1/agents/me')
    const err = await expectError(refused, 429, 'rate_limit_exceeded')
    expect(err.details).toEqual({ limit: 20, window: '1m', retry_after: 60 })
    expect(refused.headers.get('retry-after')).toBe('60')
    expect(limitOf(refused).slice(0, 2)).toEqual(['20', '0'])
    // its own limits are separate: sends still go through
    expect((await rawSend(a, { recipient_key: a.publicKey, body: 1 })).status).toBe(201)
    r.clock.advance(60_000)
    expect((await rawGet(a, '/v1/agents/me')).status).toBe(200)
  })
  test('health and unsigned answers carry none', async () => {
    for (const path of ['/v1/health', '/v1/health/live', '/v1/agents/me']) {
      expect(limitOf(await r.handle(new Request(BASE_URL + path)))[0]).toBeNull()
    }
  })
})

test('GET /v1/health/live answers {"status":"ok"} without touching the database', async () => {
  const r = await startTestRelay()
  try {
    await r.relay.storage.close()
    const res = await r.handle(new Request(BASE_URL + '/v1/health/live'))
    expect(res.status).toBe(200)
    expect(await res.json()).toEqual({ status: 'ok' })
    expect(res.headers.get('x-request-id')).toMatch(/^req_/)
  } finally {
    await r.close().catch(() => {})
  }
})

describe('POST /v1/agents/me/capabilities', () => {
  test('sets the caller\'s capabilities from {capabilities} or a bare array; discovery sees them', async () => {
    const a = await agent(t, { visibility: 'public' })
    const caps = [{ name: 'Translate', description: 'any language', tags: ['mrp-caps', 'NLP'], input_schema: { n: 9007199254740993 }, version: '1.0' }]
    const res = await a.transport.send('POST', '/v1/agents/me/capabilities', JSON.stringify({ capabilities: caps }).replace('9007199254740992', '9007199254740993'), {
      'content-type': 'application/json',
    })
    expect(res.status).toBe(200)
    const text = await res.text()
    expect(text).toContain('9007199254740993')
    expect(JSON.parse(text).capabilities[0]).toMatchObject({ name: 'Translate', tags: ['mrp-caps', 'nlp'], version: '1.0' })
    expect((await a.getAgent()).capabilities.map((c) => c.name)).toEqual(['Translate'])
    expect((await a.discover({ tag: ['mrp-caps'] })).agents.map((x) => x.public_key)).toEqual([a.publicKey])

    const bare = await a.transport.send('POST', '/v1/agents/me/capabilities', ['summarize', { name: 'x', input_schema: null, version: null, extra: 1 }])
    expect(bare.status).toBe(200)
    expect(((await bare.json()) as any).capabilities).toEqual([{ name: 'summarize', tags: ['summarize'] }, { name: 'x' }])
    // the same path with the caller's own key; another agent's key is 403; a bad body names the field
    expect((await a.transport.send('POST', `/v1/agents/${a.publicKey}/capabilities`, { capabilities: [] })).status).toBe(200)
    expect((await a.getAgent()).capabilities).toEqual([])
    const other = await agent(t)
    await expectError(await a.transport.send('POST', `/v1/agents/${other.publicKey}/capabilities`, { capabilities: [] }), 403, 'forbidden')
    const e = await expectError(await a.transport.send('POST', '/v1/agents/me/capabilities', {}), 400, 'bad_request')
    expect(Object.keys(e.details.fields)).toEqual(['capabilities'])
    await expectError(await a.transport.send('POST', '/v1/agents/me/capabilities', { capabilities: [{ name: 'a' }, { name: 'a' }] }), 400, 'bad_request')
  })
})

describe('timestamps as MRP SDKs sign them', () => {
  test('whole seconds (…T10:00:00Z) are accepted; the identical request again in that second is a replay (README, MRP compatibility)', async () => {
    const { signed } = await import('../support/signed.ts')
    const keys = generateKeyPair()
    const second = new Date(Math.floor(t.clock.now() / 1000) * 1000).toISOString().replace('.000Z', 'Z')
    expect(second).toMatch(/T\d{2}:\d{2}:\d{2}Z$/)
    const get = () => t.handle(signed(keys, 'GET', '/v1/agents/me', { timestamp: second }))
    expect((await get()).status).toBe(200)
    await expectError(await get(), 409, 'replay_detected')
    // the next second, or any millisecond, signs afresh
    const later = new Date(Date.parse(second) + 1000).toISOString().replace('.000Z', 'Z')
    expect((await t.handle(signed(keys, 'GET', '/v1/agents/me', { timestamp: later }))).status).toBe(200)
  })
})
