/** Unit tests: the sliding-log rate limiter, group commit, cursors. */
import { Database } from 'bun:sqlite'
import { describe, expect, test } from 'bun:test'
import { decodeCursor, encodeCursor } from '../../src/services/cursor.ts'
import { RateLimiter } from '../../src/services/rate-limiter.ts'

describe('RateLimiter', () => {
  test('exact sliding log: N in any 60 s span, a slot frees 60 s after its request', async () => {
    const rl = new RateLimiter({ send: 3, poll: 0 })
    expect((await rl.check('send', 'a', 0)).allowed).toBe(true)
    expect((await rl.check('send', 'a', 10_000)).allowed).toBe(true)
    expect((await rl.check('send', 'a', 59_000)).remaining).toBe(0)
    const refused = await rl.check('send', 'a', 59_999)
    expect(refused).toMatchObject({ allowed: false, remaining: 0, retryAfterS: 1, resetAt: 60 })
    expect(await rl.check('send', 'a', 60_000)).toMatchObject({ allowed: true, remaining: 0, resetAt: 70 })
    expect((await rl.check('send', 'a', 60_001)).allowed).toBe(false)
    expect((await rl.check('send', 'b', 60_001)).allowed).toBe(true) // per key
    expect(await rl.check('poll', 'a', 60_001)).toMatchObject({ allowed: true, headers: {} }) // 0 = unlimited
  })

  test('refused checks are not counted', async () => {
    const rl = new RateLimiter({ send: 1, poll: 1 })
    await rl.check('send', 'a', 0)
    for (let i = 1; i < 1000; i++) expect((await rl.check('send', 'a', i * 50)).allowed).toBe(false)
    expect((await rl.check('send', 'a', 60_000)).allowed).toBe(true)
  })

  test('enforce throws the docs/protocol.md §7 error; peek does not count', async () => {
    const rl = new RateLimiter({ send: 1, poll: 1 })
    expect(await rl.peek('poll', 'a', 5_500)).toMatchObject({ limit: 1, remaining: 1, resetAt: 6 })
    await rl.enforce('poll', 'a', 5_500)
    expect(await rl.peek('poll', 'a', 6_000)).toMatchObject({ remaining: 0, resetAt: 66 })
    try {
      await rl.enforce('poll', 'a', 6_000)
      throw new Error('not refused')
    } catch (err: any) {
      expect(err.code).toBe('rate_limit_exceeded')
      expect(err.details).toEqual({ limit: 1, window: '1m', retry_after: 60 })
      expect(err.headers).toEqual({ 'X-RateLimit-Limit': '1', 'X-RateLimit-Remaining': '0', 'X-RateLimit-Reset': '66', 'Retry-After': '60' })
    }
  })

  test('memory follows traffic: idle agents are pruned, long logs compact', async () => {
    const rl = new RateLimiter({ send: 100_000, poll: 5 })
    for (let i = 0; i < 5_000; i++) await rl.check('send', 'busy', i)
    for (let i = 0; i < 100; i++) await rl.check('poll', `agent${i}`, 0)
    expect(rl.tracked()).toEqual({ send: 1, poll: 100, pollRequest: 0, request: 0 })
    expect(await rl.prune(59_999)).toBe(0)
    expect(await rl.prune(62_000)).toBe(100)
    expect(rl.tracked()).toEqual({ send: 1, poll: 0, pollRequest: 0, request: 0 })
    // at 64 s the requests of 4.001 s … 4.999 s still count, plus this one
    expect((await rl.check('send', 'busy', 64_000)).remaining).toBe(100_000 - 1000)
    expect(await rl.prune(125_000)).toBe(1)
  })
})

describe('cursors', () => {
  test('round-trip and strict decoding', () => {
    const pos = { createdAt: 1795341600123, messageId: 'msg_1795341600_0123456789ab' }
    expect(decodeCursor(encodeCursor(pos))).toEqual(pos)
    for (const bad of ['', 'x', encodeCursor(pos) + '=', Buffer.from('1.msg_1_XYZ').toString('base64url'), Buffer.from('-1.msg_1_0123456789ab').toString('base64url')]) {
      expect(() => decodeCursor(bad)).toThrow(expect.objectContaining({ code: 'bad_request' }))
    }
  })
})
