/** docs/protocol.md §11: every error is the envelope with a request id; no malformed input gives a 500. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { BASE_URL, expectError, startTestRelay, type TestRelay } from '../support/harness.ts'
import { signed } from '../support/signed.ts'

let t: TestRelay
beforeAll(async () => {
  t = await startTestRelay()
})
afterAll(() => t.close())

const me = generateKeyPair()
const now = () => t.clock.now()
const mine = () => `/v1/agents/${me.publicKey}`

describe('unknown routes and methods → 404 not_found', () => {
  const cases: [string, string][] = [
    ['GET', '/'],
    ['GET', '/v1'],
    ['GET', '/v2/agents'],
    ['POST', '/v1/health'],
    ['PUT', '/v1/agents/xyz'],
    ['GET', '/v1/agents'],
    ['POST', '/v1/agents/' + 'A'.repeat(43)],
    ['DELETE', '/v1/openapi.json'],
    ['GET', '/v1/nothing/here?x=1'],
  ]
  for (const [method, path] of cases) {
    test(`${method} ${path} without auth`, async () => {
      await expectError(await t.handle(new Request(BASE_URL + path, { method })), 404, 'not_found')
    })
    test(`${method} ${path} with auth headers`, async () => {
      await expectError(await t.handle(signed(me, method, path, { nowMs: now() })), 404, 'not_found')
    })
  }
})

describe('malformed requests never produce a 500', () => {
  const bodies: [string, string | Uint8Array][] = [
    ['truncated JSON', '{"display_name": "x"'],
    ['not JSON', 'hello world'],
    ['JSON string', '"just a string"'],
    ['JSON number', '42'],
    ['JSON null', 'null'],
    ['array', '[{"display_name":"x"}]'],
    ['nested depth', '['.repeat(5000) + ']'.repeat(5000)],
    ['wrong types everywhere', '{"display_name":{},"visibility":1,"inbox_policy":[],"metadata":"x","capabilities":{}}'],
    ['huge string', JSON.stringify({ display_name: 'x'.repeat(1_500_000) })],
    ['unicode and emoji', JSON.stringify({ display_name: '名前 🚀 \u202e\u0000 ÿ' })],
    ['lone surrogate escape', '{"display_name":"\\ud800"}'],
    ['invalid UTF-8 bytes', new Uint8Array([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d])],
    ['BOM prefix', '\ufeff{"display_name":"x"}'],
    ['duplicate keys', '{"display_name":"a","display_name":"b"}'],
    ['__proto__ key', '{"__proto__":{"admin":true},"metadata":{"__proto__":{"x":1}}}'],
    ['capabilities with nulls', '{"capabilities":[null,1,"x"]}'],
    ['big numbers', '{"metadata":{"n":1e999999}}'],
  ]
  for (const [name, body] of bodies) {
    test(`PATCH with ${name}`, async () => {
      const res = await t.handle(signed(me, 'PATCH', mine(), { nowMs: now(), body }))
      expect(res.status).toBeGreaterThanOrEqual(200)
      expect(res.status).toBeLessThan(500)
      if (res.status >= 400) {
        const err = await expectError(res, res.status, ((await res.clone().json()) as any).error.code)
        expect(err.message).not.toMatch(/stack|SQL|sqlite|at \w+ \(/i)
      }
    })
  }

  test('a body over 2 MiB is refused with 413 before parsing', async () => {
    const body = '{"metadata":{"x":"' + 'y'.repeat(2 * 1024 * 1024) + '"}}'
    await expectError(await t.handle(signed(me, 'PATCH', mine(), { nowMs: now(), body })), 413, 'payload_too_large')
  })

  test('a chunked body over 2 MiB (no Content-Length) is refused with 413', async () => {
    const chunk = new Uint8Array(256 * 1024).fill(0x20)
    let sent = 0
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent++ < 12) controller.enqueue(chunk)
        else controller.close()
      },
    })
    const req = signed(me, 'PATCH', mine(), { nowMs: now(), body: '' })
    const streamed = new Request(req.url, { method: 'PATCH', headers: req.headers, body: stream, duplex: 'half' } as RequestInit)
    streamed.headers.delete('content-length')
    await expectError(await t.handle(streamed), 413, 'payload_too_large')
  })

  const paths = [
    '/v1/agents/..%2F..%2Fetc%2Fpasswd',
    '/v1/agents/%00',
    '/v1/agents/' + 'A'.repeat(5000),
    '/v1/agents/' + encodeURIComponent('名前'),
    '/v1/agents/%ZZ',
    '/v1/agents/' + me.publicKey + '%2Fcapabilities',
    '/v1/agents/' + me.publicKey + '/capabilities/../../x',
    '//v1//agents//' + me.publicKey,
    '/v1/agents/' + me.publicKey + '?limit=-1&limit=abc&%00=%ff',
  ]
  for (const path of paths) {
    test(`path trick ${path.slice(0, 60)}`, async () => {
      const res = await t.handle(signed(me, 'GET', path, { nowMs: now() }))
      expect(res.status).toBeLessThan(500)
      expect(res.headers.get('x-request-id')).toMatch(/^req_/)
    })
  }

  test('bad base64 keys in the header and the path', async () => {
    for (const key of ['', '=', 'A'.repeat(42) + '=', 'A'.repeat(44), '+'.repeat(43), 'ÿ'.repeat(43)]) {
      const res = await t.handle(signed(me, 'GET', mine(), { nowMs: now(), headers: { 'X-M2M-Public-Key': key } }))
      await expectError(res, 401, 'unauthorized')
    }
  })

  test('every response carries X-Request-Id, success or not', async () => {
    for (const req of [new Request(BASE_URL + '/v1/health'), new Request(BASE_URL + '/v1/openapi.json'), signed(me, 'GET', mine(), { nowMs: now() })]) {
      const res = await t.handle(req)
      expect(res.status).toBe(200)
      expect(res.headers.get('x-request-id')).toMatch(/^req_[0-9a-f]{16}$/)
    }
  })
})

describe('unexpected failures', () => {
  test('become 500 internal_error with a generic message, logged with the request id', async () => {
    const lines: string[] = []
    const { createLogger } = await import('../../src/lib/logger.ts')
    const r = await startTestRelay({}, { logger: createLogger('error', (l) => lines.push(l)) })
    try {
      const c = r.client()
      await c.getAgent()
      // break the storage under the running relay
      await r.sql('DROP TABLE agent_tags')
      const res = await c.transport.send('PATCH', `/v1/agents/${c.publicKey}`, { capabilities: [{ name: 'x', tags: ['a'] }] })
      const err = await expectError(res, 500, 'internal_error')
      expect(err.message).toBe('Internal error')
      const logged = lines.map((l) => JSON.parse(l)).find((l) => l.msg === 'unexpected error')
      expect(logged.request_id).toBe(err.request_id)
      expect(logged.stack).toBeString()
    } finally {
      await r.close()
    }
  })
})
