/** docs/protocol.md §7 over HTTP: per-agent sliding minute, exact headers, 429 envelope, what counts. */
import { afterEach, describe, expect, test } from 'bun:test'
import { expectError, startTestRelay, type TestRelay } from '../support/harness.ts'
import { agent, msg, rawGet, rawSend, unknownKey } from './helpers.ts'

let t: TestRelay
afterEach(() => t?.close())

const headers = (res: Response) => ({
  limit: res.headers.get('x-ratelimit-limit'),
  remaining: res.headers.get('x-ratelimit-remaining'),
  reset: res.headers.get('x-ratelimit-reset'),
})
const sec = (ms: number) => String(Math.ceil(ms / 1000))

describe('send: 30 per sliding minute by default', () => {
  test('headers count down exactly; the 31st → 429 with Retry-After and details', async () => {
    t = await startTestRelay()
    expect(t.relay.config.rateLimits.sendPerMin).toBe(30)
    const a = await agent(t)
    const to = unknownKey()
    const start = t.clock.now()
    for (let i = 1; i <= 30; i++) {
      const res = await rawSend(a, msg(to))
      expect(res.status).toBe(201)
      expect(headers(res)).toEqual({ limit: '30', remaining: String(30 - i), reset: sec(start + 60_000) })
      t.clock.advance(1000) // one per second: the first leaves the window at start + 60 s
    }
    // now = start + 30 s
    const refused = await rawSend(a, msg(to))
    const e = await expectError(refused, 429, 'rate_limit_exceeded')
    expect(e.details).toEqual({ limit: 30, window: '1m', retry_after: 30 })
    expect(refused.headers.get('retry-after')).toBe('30')
    expect(headers(refused)).toEqual({ limit: '30', remaining: '0', reset: sec(start + 60_000) })
  })

  test('sliding, not fixed: each request frees its slot exactly 60 s after it was counted', async () => {
    t = await startTestRelay({ rateLimits: { sendPerMin: 3, pollPerMin: 0 } })
    const a = await agent(t)
    const to = unknownKey()
    const t0 = t.clock.now()
    expect((await rawSend(a, msg(to))).status).toBe(201) // t0
    t.clock.advance(20_000)
    expect((await rawSend(a, msg(to))).status).toBe(201) // t0+20
    expect((await rawSend(a, msg(to))).status).toBe(201) // t0+20
    t.clock.advance(39_999) // t0+59.999: the first still counts
    const r1 = await rawSend(a, msg(to))
    await expectError(r1, 429, 'rate_limit_exceeded')
    expect(r1.headers.get('retry-after')).toBe('1')
    t.clock.advance(1) // t0+60: one slot frees
    const ok = await rawSend(a, msg(to))
    expect(ok.status).toBe(201)
    expect(headers(ok)).toEqual({ limit: '3', remaining: '0', reset: sec(t0 + 80_000) })
    await expectError(await rawSend(a, msg(to)), 429, 'rate_limit_exceeded')
  })

  test('429s do not count; 400/422 are refused before the check and do not count; 403 acl_denied does', async () => {
    t = await startTestRelay({ rateLimits: { sendPerMin: 2, pollPerMin: 0 } })
    const a = await agent(t)
    const closed = await agent(t, { inbox_policy: 'closed' })
    const t0 = t.clock.now()
    for (let i = 0; i < 5; i++) {
      const bad = await rawSend(a, { recipient_key: 'x', body: 1 })
      await expectError(bad, 400, 'bad_request')
      expect(headers(bad)).toEqual({ limit: '2', remaining: '2', reset: sec(t0) }) // reported, not counted
      await expectError(await rawSend(a, { recipient_key: closed.publicKey }), 422, 'unprocessable_entity')
    }
    const denied = await rawSend(a, msg(closed))
    await expectError(denied, 403, 'acl_denied')
    expect(headers(denied).remaining).toBe('1') // counted
    expect((await rawSend(a, msg(a))).status).toBe(201)
    for (let i = 0; i < 10; i++) await expectError(await rawSend(a, msg(a)), 429, 'rate_limit_exceeded')
    t.clock.advance(60_000)
    // had the 429s counted, the window would still be full
    expect(headers(await rawSend(a, msg(a)))).toMatchObject({ remaining: '1' })
  })

  test('limits are per agent, and HTTP and WebSocket sends share one window', async () => {
    t = await startTestRelay({ rateLimits: { sendPerMin: 2, pollPerMin: 0 } })
    const [a, b] = [await agent(t), await agent(t)]
    const svc = t.relay.features.messages.messages
    const row = (await t.relay.storage.agents.find(a.publicKey))!
    await svc.send(row, msg(b)) // the WebSocket path
    expect(headers(await rawSend(a, msg(b))).remaining).toBe('0')
    await expectError(await rawSend(a, msg(b)), 429, 'rate_limit_exceeded')
    await expect(svc.send(row, msg(b))).rejects.toMatchObject({ code: 'rate_limit_exceeded' })
    expect((await rawSend(b, msg(a))).status).toBe(201)
  })
})

describe('poll: 120 per sliding minute by default', () => {
  test('headers on every poll, 429 beyond; bad parameters are not counted', async () => {
    t = await startTestRelay()
    expect(t.relay.config.rateLimits.pollPerMin).toBe(120)
    const a = await agent(t)
    const t0 = t.clock.now()
    await expectError(await rawGet(a, '/v1/messages?limit=0'), 400, 'bad_request')
    for (let i = 1; i <= 120; i++) {
      const res = await rawGet(a, '/v1/messages')
      expect(res.status).toBe(200)
      expect(headers(res)).toEqual({ limit: '120', remaining: String(120 - i), reset: sec(t0 + 60_000) })
    }
    const refused = await rawGet(a, '/v1/messages')
    const e = await expectError(refused, 429, 'rate_limit_exceeded')
    expect(e.details).toEqual({ limit: 120, window: '1m', retry_after: 60 })
    expect(refused.headers.get('retry-after')).toBe('60')
  })

  test('reading by id, status and threads count against the general limit, not the poll limit', async () => {
    t = await startTestRelay({ rateLimits: { sendPerMin: 5, pollPerMin: 1, requestsPerMin: 100 } })
    const a = await agent(t)
    const { message_id } = await a.send(msg(a, { thread_id: 'x' }))
    let last = Infinity
    for (const path of [`/v1/messages/${message_id}`, `/v1/messages/${message_id}/status`, '/v1/messages/threads/x']) {
      for (let i = 0; i < 3; i++) {
        const res = await rawGet(a, path)
        expect(res.status).toBe(200)
        expect(res.headers.get('x-ratelimit-limit')).toBe('100')
        const remaining = Number(res.headers.get('x-ratelimit-remaining'))
        expect(remaining).toBeLessThan(last)
        last = remaining
      }
    }
  })
})

test('0 = unlimited: no window, no headers', async () => {
  t = await startTestRelay({ rateLimits: { sendPerMin: 0, pollPerMin: 0, requestsPerMin: 0 } })
  const a = await agent(t)
  for (let i = 0; i < 200; i++) {
    const res = await rawSend(a, msg(a))
    expect(res.status).toBe(201)
    expect(res.headers.get('x-ratelimit-limit')).toBeNull()
  }
  expect((await rawGet(a, '/v1/messages')).headers.get('x-ratelimit-limit')).toBeNull()
  expect((await rawGet(a, `/v1/agents/${a.publicKey}`)).headers.get('x-ratelimit-limit')).toBeNull()
  expect(t.relay.features.messages.rateLimiter.tracked()).toEqual({ send: 0, poll: 0, request: 0 })
})
