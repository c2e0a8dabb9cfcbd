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

describe('poll: 120 messages received per sliding minute by default', () => {
  test('an empty inbox polled twice a second for two minutes is never refused', async () => {
    t = await startTestRelay()
    expect(t.relay.config.rateLimits.pollPerMin).toBe(120)
    expect(t.relay.config.rateLimits.pollRequestsPerMin).toBe(600)
    const a = await agent(t)
    for (let i = 0; i < 240; i++) {
      const res = await rawGet(a, '/v1/messages')
      expect([i, res.status]).toEqual([i, 200])
      expect(headers(res)).toMatchObject({ limit: '120', remaining: '120' })
      t.clock.advance(500)
    }
  })

  test('messages are counted: a page holds what is left of the limit, then 429 until the window frees', async () => {
    t = await startTestRelay({ rateLimits: { sendPerMin: 0 } })
    const [a, b] = [await agent(t), await agent(t)]
    for (let i = 0; i < 130; i++) {
      await a.send(msg(b, { body: i }))
      t.clock.advance(1)
    }
    const t0 = t.clock.now()
    await expectError(await rawGet(b, '/v1/messages?limit=0'), 400, 'bad_request')
    const first = await rawGet(b, '/v1/messages?limit=100')
    const p1: any = await first.json()
    expect([p1.messages.length, p1.has_more]).toEqual([100, true])
    expect(headers(first)).toEqual({ limit: '120', remaining: '20', reset: sec(t0 + 60_000) })
    t.clock.advance(1000)
    const second = await rawGet(b, '/v1/messages?limit=100')
    const p2: any = await second.json()
    expect([p2.messages.length, p2.has_more]).toEqual([20, true])
    expect(p2.messages[0].body).toBe(100)
    expect(headers(second).remaining).toBe('0')
    const refused = await rawGet(b, '/v1/messages')
    const e = await expectError(refused, 429, 'rate_limit_exceeded')
    expect(e.details).toEqual({ limit: 120, window: '1m', retry_after: 59 })
    expect(refused.headers.get('retry-after')).toBe('59')
    // the first 100 leave the window at t0 + 60 s; the last 10 come then
    t.clock.advance(59_000)
    const third: any = await (await rawGet(b, '/v1/messages?limit=100')).json()
    expect(third.messages.map((m: any) => m.body)).toEqual([120, 121, 122, 123, 124, 125, 126, 127, 128, 129])
  })

  test('the request cap (RELAY_RATE_POLL_REQUESTS_PER_MIN) stops a loop, inbox empty or not', async () => {
    t = await startTestRelay({ rateLimits: { pollRequestsPerMin: 5 } })
    const a = await agent(t)
    for (let i = 0; i < 5; i++) expect((await rawGet(a, '/v1/messages')).status).toBe(200)
    const refused = await rawGet(a, '/v1/messages')
    const e = await expectError(refused, 429, 'rate_limit_exceeded')
    expect(e.details).toEqual({ limit: 5, window: '1m', retry_after: 60 })
    t.clock.advance(60_000)
    expect((await rawGet(a, '/v1/messages')).status).toBe(200)
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
  t = await startTestRelay({ rateLimits: { sendPerMin: 0, pollPerMin: 0, pollRequestsPerMin: 0, requestsPerMin: 0 } })
  const a = await agent(t)
  for (let i = 0; i < 200; i++) {
    const res = await rawSend(a, msg(a))
    expect(res.status).toBe(201)
    expect(res.headers.get('x-ratelimit-limit')).toBeNull()
  }
  expect((await rawGet(a, '/v1/messages')).headers.get('x-ratelimit-limit')).toBeNull()
  expect((await rawGet(a, `/v1/agents/${a.publicKey}`)).headers.get('x-ratelimit-limit')).toBeNull()
  expect(t.relay.features.messages.rateLimiter.tracked()).toEqual({ send: 0, poll: 0, pollRequest: 0, request: 0 })
})
