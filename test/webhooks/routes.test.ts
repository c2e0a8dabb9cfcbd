/** PUT / GET / DELETE /v1/agents/{publicKey}/webhook (docs/protocol.md §9): owner only, validation, target policy. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { expectError, startTestRelay, type TestRelay } from '../support/harness.ts'

let t: TestRelay
beforeAll(async () => {
  t = await startTestRelay()
})
afterAll(() => t.close())

const secret = () => randomBytes(32).toString('base64url')
const put = (c: ReturnType<TestRelay['client']>, body: unknown, key = c.publicKey) => c.transport.send('PUT', `/v1/agents/${key}/webhook`, body)
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

describe('happy path', () => {
  test('PUT creates, GET shows it (never the secret), re-PUT replaces and re-enables, DELETE removes', async () => {
    const a = t.client()
    const s = secret()
    const res = await put(a, { url: 'https://agent.example/hook', secret: s })
    expect(res.status).toBe(200)
    const created = (await res.json()) as any
    expect(created).toEqual({ url: 'https://agent.example/hook', enabled: true, consecutive_failures: 0, created_at: expect.stringMatching(ISO), updated_at: expect.stringMatching(ISO) })
    expect(JSON.stringify(created)).not.toContain(s)
    expect(await a.getWebhook()).toEqual(created)

    // a webhook that failed and was disabled comes back enabled with no failures
    await t.sql('UPDATE webhooks SET enabled = FALSE, consecutive_failures = 3 WHERE public_key = ?', [a.publicKey])
    expect(await a.getWebhook()).toMatchObject({ enabled: false, consecutive_failures: 3 })
    t.clock.advance(5000)
    const replaced = await a.setWebhook('http://other.example:8080/in?x=1', secret())
    expect(replaced).toEqual({ ...created, url: 'http://other.example:8080/in?x=1', enabled: true, consecutive_failures: 0, updated_at: new Date(t.clock.now()).toISOString() })
    expect(replaced.created_at).toBe(created.created_at)

    const del = await a.transport.send('DELETE', `/v1/agents/${a.publicKey}/webhook`)
    expect(del.status).toBe(204)
    expect(await del.text()).toBe('')
    await expectError(await a.transport.send('GET', `/v1/agents/${a.publicKey}/webhook`), 404, 'not_found')
    await expectError(await a.transport.send('DELETE', `/v1/agents/${a.publicKey}/webhook`), 404, 'not_found')
  })

  test('the secret is stored as given and never appears in any answer', async () => {
    const a = t.client()
    const s = secret()
    await a.setWebhook('https://agent.example/hook', s)
    const [stored] = await t.sql<{ secret: string }>('SELECT secret FROM webhooks WHERE public_key = ?', [a.publicKey])
    expect(stored?.secret).toBe(s)
  })
})

describe('at the same moment', () => {
  test('five PUTs at once: one webhook, the last written', async () => {
    const a = t.client()
    const urls = Array.from({ length: 5 }, (_, i) => `https://agent.example/hook/${i}`)
    const statuses = (await Promise.all(urls.map((u) => a.transport.send('PUT', `/v1/agents/${a.publicKey}/webhook`, { url: u, secret: secret() })))).map((r) => r.status)
    expect(statuses).toEqual([200, 200, 200, 200, 200])
    expect(urls).toContain((await a.getWebhook()).url)
    expect(await t.sql('SELECT count(*) AS n FROM webhooks WHERE public_key = ?', [a.publicKey])).toEqual([{ n: 1 }])
  })
})

describe('ownership', () => {
  test('another agent gets 403 forbidden on PUT, GET and DELETE', async () => {
    const owner = t.client()
    await owner.setWebhook('https://agent.example/hook', secret())
    const other = t.client()
    await expectError(await put(other, { url: 'https://evil.example/', secret: secret() }, owner.publicKey), 403, 'forbidden')
    await expectError(await other.transport.send('GET', `/v1/agents/${owner.publicKey}/webhook`), 403, 'forbidden')
    await expectError(await other.transport.send('DELETE', `/v1/agents/${owner.publicKey}/webhook`), 403, 'forbidden')
    expect((await owner.getWebhook()).url).toBe('https://agent.example/hook')
  })
})

describe('validation (400)', () => {
  const cases: [string, unknown, string][] = [
    ['no body', undefined, 'body'],
    ['not an object', [1], 'body'],
    ['missing url', { secret: 'S' }, 'url'],
    ['missing secret', { url: 'https://a.example/' }, 'secret'],
    ['unknown field beside a bad secret (the field is ignored)', { url: 'https://a.example/', secret: 'short', events: ['x'] }, 'secret'],
    ['url not a string', { url: 7, secret: 'S' }, 'url'],
    ['not a URL', { url: 'not a url', secret: 'S' }, 'url'],
    ['relative URL', { url: '/hook', secret: 'S' }, 'url'],
    ['ftp scheme', { url: 'ftp://a.example/hook', secret: 'S' }, 'url'],
    ['javascript scheme', { url: 'javascript:alert(1)', secret: 'S' }, 'url'],
    ['URL over 2048 characters', { url: 'https://a.example/' + 'x'.repeat(2031), secret: 'S' }, 'url'],
    ['secret of 31 bytes', { url: 'https://a.example/', secret: randomBytes(31).toString('base64url') }, 'secret'],
    ['secret of 33 bytes', { url: 'https://a.example/', secret: randomBytes(33).toString('base64url') }, 'secret'],
    ['padded secret', { url: 'https://a.example/', secret: randomBytes(32).toString('base64url') + '=' }, 'secret'],
    ['standard base64 secret', { url: 'https://a.example/', secret: Buffer.alloc(32, 0xfb).toString('base64') }, 'secret'],
    ['hex secret', { url: 'https://a.example/', secret: randomBytes(32).toString('hex') }, 'secret'],
  ]
  for (const [name, body, field] of cases) {
    test(name, async () => {
      const a = t.client()
      const fixed = body && typeof body === 'object' && (body as any).secret === 'S' ? { ...(body as object), secret: secret() } : body
      const e = await expectError(await put(a, fixed), 400, 'bad_request')
      expect(Object.keys(e.details.fields)).toContain(field)
      await expectError(await a.transport.send('GET', `/v1/agents/${a.publicKey}/webhook`), 404, 'not_found')
    })
  }

  test('a URL of exactly 2048 characters is accepted', async () => {
    const url = 'https://a.example/' + 'x'.repeat(2048 - 'https://a.example/'.length)
    expect(url.length).toBe(2048)
    expect((await put(t.client(), { url, secret: secret() })).status).toBe(200)
  })

  test('malformed JSON is 400', async () => {
    const a = t.client()
    await expectError(await a.transport.send('PUT', `/v1/agents/${a.publicKey}/webhook`, '{"url":'), 400, 'bad_request')
  })
})

describe('URLs with spaces or control characters → 400, never stored or echoed', () => {
  for (const url of ['http://a.example/x\r\nX-Injected: 1', 'http://a.example/\n', 'http://a.example/\u0000', 'http://a .example/', 'http://a.example/ x', 'http://a.example/\t', 'http://a.example/\u007f', 'http://a.example/\u0085', 'http://a.example/\u2028', ' http://a.example/']) {
    test(JSON.stringify(url), async () => {
      const a = t.client()
      const e = await expectError(await put(a, { url, secret: secret() }), 400, 'bad_request')
      expect(e.details.fields.url).toBe('must not contain spaces or control characters (percent-encode them)')
      await expectError(await a.transport.send('GET', `/v1/agents/${a.publicKey}/webhook`), 404, 'not_found')
    })
  }
  test('percent-encoded, they are fine', async () => {
    expect((await put(t.client(), { url: 'http://a.example/x%0D%0A%20y', secret: secret() })).status).toBe(200)
  })
})

describe('target policy at registration (422 for literal addresses and loopback names)', () => {
  const refused = [
    'http://127.0.0.1/hook',
    'http://127.1.2.3:9000/',
    'http://2130706433/', // 127.0.0.1 in decimal, normalized by the URL parser
    'http://0x7f.1/',
    'http://10.0.0.5/',
    'http://172.16.0.1/',
    'http://172.31.255.254/',
    'http://192.168.1.10/',
    'http://169.254.169.254/latest/meta-data/',
    'http://100.64.0.1/',
    'http://0.0.0.0/',
    'http://224.0.0.1/',
    'http://255.255.255.255/',
    'http://[::1]/',
    'http://[::]/',
    'http://[fe80::1]/',
    'http://[fd12:3456::1]/',
    'http://[ff02::1]/',
    'http://[::ffff:127.0.0.1]/',
    'http://[::ffff:10.1.1.1]/',
    'http://[::ffff:169.254.169.254]/',
    // documentation and reserved ranges (IANA special-purpose registries)
    'http://192.0.2.10/',
    'http://198.51.100.1/',
    'http://203.0.113.99/',
    'http://198.18.0.1/',
    'http://240.1.2.3/',
    'http://0.1.2.3/',
    'http://[2001:db8::1]/',
    'http://[100::1]/',
    'http://[64:ff9b::10.0.0.1]/',
    'http://[64:ff9b::c0a8:101]/',
    'http://[3fff::1]/',
    // loopback names: they can only ever resolve to this machine
    'http://localhost:9/',
    'http://LOCALHOST/hook',
    'http://localhost./',
    'https://api.localhost/',
    'http://ip6-localhost/',
    'http://ip6-loopback:8080/',
    'http://localhost.localdomain/',
  ]
  for (const url of refused) {
    test(url, async () => {
      const e = await expectError(await put(t.client(), { url, secret: secret() }), 422, 'unprocessable_entity')
      expect(e.details.field).toBe('url')
      expect(e.message).toContain('RELAY_WEBHOOK_ALLOW_PRIVATE_TARGETS')
    })
  }

  test('public addresses and names are accepted; names are checked at delivery, after resolution', async () => {
    for (const url of ['http://8.8.8.8/', 'https://[2606:4700:4700::1111]/', 'http://172.32.0.1/', 'http://[::ffff:8.8.8.8]/', 'https://hook.example/', 'https://localhost.example/', 'https://mylocalhost/']) {
      const res = await put(t.client(), { url, secret: secret() })
      expect([url, res.status]).toEqual([url, 200])
    }
  })

  test('allowPrivateTargets accepts them', async () => {
    const home = await startTestRelay({ webhooks: { allowPrivateTargets: true } })
    try {
      const res = await put(home.client(), { url: 'http://192.168.1.10:8080/hook', secret: secret() })
      expect(res.status).toBe(200)
      expect((await put(home.client(), { url: 'http://localhost:8080/hook', secret: secret() })).status).toBe(200)
    } finally {
      await home.close()
    }
  })
})

describe('documentation', () => {
  test('the OpenAPI document describes the webhook endpoints and /v1/ws', async () => {
    const doc: any = await (await t.handle(new Request('http://relay.test/v1/openapi.json'))).json()
    for (const m of ['put', 'get', 'delete']) expect(doc.paths['/v1/agents/{publicKey}/webhook']?.[m]).toBeDefined()
    expect(Object.keys(doc.paths['/v1/agents/{publicKey}/webhook'].put.requestBody.content['application/json'].schema.properties).sort()).toEqual(['secret', 'url'])
    expect(doc.paths['/v1/ws'].get.responses['101']).toBeDefined()
  })

  test('a plain GET /v1/ws: 401 without a signature, 400 with one (it is a WebSocket endpoint)', async () => {
    await expectError(await t.handle(new Request('http://relay.test/v1/ws')), 401, 'unauthorized')
    await expectError(await t.client().transport.send('GET', '/v1/ws'), 400, 'bad_request')
  })
})
