/** The ring of recent warnings and errors behind GET /v1/admin/errors. */
import { describe, expect, test } from 'bun:test'
import { FakeClock } from '../../src/lib/clock.ts'
import { createLogger } from '../../src/lib/logger.ts'
import { RecentLog, recordingLogger } from '../../src/lib/recent-log.ts'

describe('RecentLog', () => {
  test('keeps the newest lines, newest first, once it wraps around', () => {
    const ring = new RecentLog(3)
    for (let i = 1; i <= 5; i++) ring.push({ time: `t${i}`, level: 'warn', msg: `m${i}`, fields: {} })
    expect(ring.size).toBe(3)
    expect(ring.list().map((e) => e.msg)).toEqual(['m5', 'm4', 'm3'])
    expect(ring.list(2).map((e) => e.msg)).toEqual(['m5', 'm4'])
    expect(new RecentLog(0).list()).toEqual([])
  })

  test('the recording logger keeps warn and error whatever the level written, and passes every line on', () => {
    const written: string[] = []
    const ring = new RecentLog(10)
    const clock = new FakeClock()
    const logger = recordingLogger(createLogger('error', (line) => written.push(line)), ring, clock)
    logger.debug('d')
    logger.info('i')
    logger.warn('w', { n: 1 })
    logger.error('e', { big: 'x'.repeat(10_000), nested: { a: 1 } })
    expect(written.map((l) => JSON.parse(l).msg)).toEqual(['e'])
    expect(JSON.parse(written[0]).big).toHaveLength(10_000)
    const kept = ring.list()
    expect(kept.map((e) => [e.level, e.msg, e.time])).toEqual([
      ['error', 'e', new Date(clock.now()).toISOString()],
      ['warn', 'w', new Date(clock.now()).toISOString()],
    ])
    expect((kept[0].fields.big as string).length).toBe(2001)
    expect(kept[0].fields.nested).toEqual({ a: 1 })
    expect(logger.enabled('warn')).toBe(false)
  })
})
