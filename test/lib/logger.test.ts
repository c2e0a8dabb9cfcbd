/** A failure repeated by every timer is written once per window, with how many were held back. */
import { expect, test } from 'bun:test'
import { createLogger, quietRepeats } from '../../src/lib/logger.ts'

test('repeated warnings and errors are held back for the window; the next one says how many; other lines pass', () => {
  const lines: any[] = []
  let t = 0
  const log = quietRepeats(createLogger('debug', (l) => lines.push(JSON.parse(l))), 30_000, () => t)
  for (let i = 0; i < 50; i++) {
    log.warn('heartbeat failed', { error: 'connection refused' })
    log.info('request', { n: i })
    t += 100
  }
  log.warn('heartbeat failed', { error: 'another failure' }) // a different error is written
  log.error('heartbeat failed', { error: 'connection refused' }) // so is the same text at another level
  t = 30_000
  log.warn('heartbeat failed', { error: 'connection refused' })
  const warns = lines.filter((l) => l.level !== 'info')
  expect(warns.map((l) => [l.level, l.error, l.repeated])).toEqual([
    ['warn', 'connection refused', undefined],
    ['warn', 'another failure', undefined],
    ['error', 'connection refused', undefined],
    ['warn', 'connection refused', 49],
  ])
  expect(lines.filter((l) => l.level === 'info').length).toBe(50)
})
