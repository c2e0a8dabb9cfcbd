/**
 * The client against answers that are not a plain success: 429 retried after Retry-After (bounded,
 * opt-out), nothing listening (a typed error naming the URL), and a server that is not a relay.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { NotARelayError, RelayApiError, RelayClient, RelayConnectionError, type RateLimitedInfo } from '../../src/client/index.ts'
import { freePort } from '../support/binary.ts'
import { BASE_URL, startTestRelay, type TestRelay } from '../support/harness.ts'

let t: TestRelay
beforeAll(async () => {
  t = await startTestRelay({ rateLimits: { sendPerMin: 1, pollPerMin: 0 } })
})
afterAll(() => t.close())

/**
 * A client of the harness relay whose 429 answers say "retry after 1 s" (the relay says up to 60 s) and
 * move the relay's clock past the window, so the retry is really accepted — by a relay that checks its
 * signature and refuses replays.
 */
function shortWindowClient(opts: { rateLimitRetry?: { retries?: number; maxWaitMs?: number } | false } = {}) {
  const seen: number[] = []
  const infos: RateLimitedInfo[] = []
  const signatures = new Set<string>()
  const client = new RelayClient({
    baseUrl: BASE_URL,
    keys: generateKeyPair(),
    now: () => t.clock.now(),
    // these tests count requests: no profile look-ups for encryption
    encryption: { autoEncrypt: false },
    fetch: async (req) => {
      signatures.add(req.headers.get('x-m2m-signature') ?? '')
      const res = await t.relay.handle(req)
      seen.push(res.status)
      if (res.status !== 429) return res
      t.clock.advance(60_000)
      const headers = new Headers(res.headers)
      headers.set('retry-after', '1')
      return new Response(res.body, { status: 429, headers })
    },
    rateLimitRetry: opts.rateLimitRetry,
    onRateLimited: (i) => void infos.push(i),
  })
  return { client, seen, infos, signatures }
}

describe('429', () => {
  test('is waited out (Retry-After) and the request sent again, freshly signed', async () => {
    const { client, seen, infos, signatures } = shortWindowClient()
    const to = generateKeyPair().publicKey
    await client.send({ recipient_key: to, body: 1 })
    const started = Date.now()
    const second = await client.send({ recipient_key: to, body: 2 })
    expect(Date.now() - started).toBeGreaterThanOrEqual(900)
    expect(second.status).toBe('sent')
    expect(seen).toEqual([201, 429, 201])
    expect(infos).toEqual([{ method: 'POST', path: '/v1/messages', attempt: 1, waitMs: 1000 }])
    expect(signatures.size).toBe(3)
  })

  test('retries are bounded: after the last one the 429 is the error', async () => {
    const to = generateKeyPair().publicKey
    const keys = generateKeyPair()
    let calls = 0
    const client = new RelayClient({
      baseUrl: BASE_URL,
      keys,
      now: () => t.clock.now(),
      // the window never frees: every attempt after the first is refused
      fetch: async (req) => {
        calls++
        const res = await t.relay.handle(req)
        if (res.status !== 429) return res
        const headers = new Headers(res.headers)
        headers.set('retry-after', '0')
        return new Response(res.body, { status: 429, headers })
      },
      rateLimitRetry: { retries: 2 },
      encryption: { autoEncrypt: false },
    })
    await client.send({ recipient_key: to, body: 1 })
    const err = await client.send({ recipient_key: to, body: 2 }).catch((e) => e)
    expect(err).toBeInstanceOf(RelayApiError)
    expect(err).toMatchObject({ status: 429, code: 'rate_limit_exceeded' })
    expect(calls).toBe(1 + 3)
  })

  test('opt-out: rateLimitRetry false answers the first 429 at once', async () => {
    const { client, seen, infos } = shortWindowClient({ rateLimitRetry: false })
    const to = generateKeyPair().publicKey
    await client.send({ recipient_key: to, body: 1 })
    const err = await client.send({ recipient_key: to, body: 2 }).catch((e) => e)
    expect(err).toMatchObject({ status: 429, code: 'rate_limit_exceeded' })
    expect(seen).toEqual([201, 429])
    expect(infos).toEqual([])
  })

  test('a Retry-After longer than maxWaitMs is not waited for', async () => {
    const { client, seen } = shortWindowClient({ rateLimitRetry: { maxWaitMs: 500 } })
    const to = generateKeyPair().publicKey
    await client.send({ recipient_key: to, body: 1 })
    const err = await client.send({ recipient_key: to, body: 2 }).catch((e) => e)
    expect(err).toMatchObject({ status: 429 })
    expect(seen).toEqual([201, 429])
  })
})

describe('503 with Retry-After', () => {
  test('is waited out and sent again, freshly signed; a 503 without Retry-After is the error at once', async () => {
    const to = generateKeyPair().publicKey
    const seen: number[] = []
    const signatures = new Set<string>()
    let busy = 1
    const client = new RelayClient({
      baseUrl: BASE_URL,
      keys: generateKeyPair(),
      now: () => t.clock.now(),
      encryption: { autoEncrypt: false },
      // the first attempt finds the relay busy, as when its pre-auth budget is full: refused unread
      fetch: async (req) => {
        signatures.add(req.headers.get('x-m2m-signature') ?? '')
        if (busy-- > 0) {
          seen.push(503)
          return new Response(JSON.stringify({ error: { code: 'service_unavailable', message: 'busy', request_id: 'req_x' } }), { status: 503, headers: { 'retry-after': '0', 'x-request-id': 'req_x' } })
        }
        const res = await t.relay.handle(req)
        seen.push(res.status)
        return res
      },
    })
    t.clock.advance(60_000)
    expect((await client.send({ recipient_key: to, body: 1 })).status).toBe('sent')
    expect(seen).toEqual([503, 201])
    expect(signatures.size).toBe(2)
    const once = new RelayClient({
      baseUrl: BASE_URL,
      keys: generateKeyPair(),
      now: () => t.clock.now(),
      encryption: { autoEncrypt: false },
      fetch: async () => new Response(JSON.stringify({ error: { code: 'service_unavailable', message: 'down', request_id: 'req_y' } }), { status: 503, headers: { 'x-request-id': 'req_y' } }),
    })
    expect(await once.send({ recipient_key: to, body: 2 }).catch((e) => e)).toMatchObject({ status: 503, code: 'service_unavailable' })
  })
})

describe('wrong addresses', () => {
  test('nothing listening: RelayConnectionError naming the URL and where to change it', async () => {
    const url = `http://127.0.0.1:${await freePort()}`
    const client = new RelayClient({ baseUrl: url, keys: generateKeyPair() })
    for (const call of [() => client.getAgent(), () => client.send({ recipient_key: client.publicKey, body: 1 }), () => client.health(), () => client.downloadBlob('blob_x')]) {
      const err = await call().catch((e) => e)
      expect(err).toBeInstanceOf(RelayConnectionError)
      expect(err).not.toBeInstanceOf(TypeError)
      expect(err.url).toBe(url)
      expect(err.message).toStartWith(`cannot reach the relay at ${url} (`)
      expect(err.message).toContain('RELAY_URL')
      expect(err.message).toContain('--relay')
    }
  })

  test('a server that is not a relay: NotARelayError, never "undefined is not an object"', async () => {
    const answers: Record<string, () => Response> = {
      '/html': () => new Response('<html>hello</html>', { headers: { 'content-type': 'text/html' } }),
      '/json': () => Response.json({}),
      '/404': () => new Response('not found', { status: 404 }),
      '/error-json': () => Response.json({ message: 'nope' }, { status: 500 }),
    }
    const server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: (req) => (answers[new URL(req.url).pathname.split('/v1')[0]] ?? answers['/404'])() })
    try {
      for (const prefix of Object.keys(answers)) {
        const url = `http://127.0.0.1:${server.port}${prefix}`
        const client = new RelayClient({ baseUrl: url, keys: generateKeyPair() })
        for (const call of [() => client.getAgent(), () => client.poll(), () => client.send({ recipient_key: client.publicKey, body: 1 }), () => client.health()]) {
          const err = await call().catch((e) => e)
          expect([prefix, err]).toEqual([prefix, expect.any(NotARelayError)])
          expect(err.message).toContain('this is not a relay')
          expect(err.message).toContain(url)
        }
      }
    } finally {
      server.stop(true)
    }
  })

  test('a relay answer is still a relay answer: errors keep their code and request id', async () => {
    const c = t.client()
    const err = await c.getMessage('msg_1_000000000000').catch((e) => e)
    expect(err).toBeInstanceOf(RelayApiError)
    expect(err).toMatchObject({ status: 404, code: 'message_not_found', requestId: expect.stringMatching(/^req_/) })
  })
})
