/**
 * The scheduler's one-instance-at-a-time jobs: an exclusive job runs through the storage's exclusive
 * runner and is skipped (not failed) while another instance holds it; other jobs run everywhere.
 */
import { describe, expect, test } from 'bun:test'
import { Scheduler, type ExclusiveRunner } from '../../src/jobs/scheduler.ts'
import { FakeClock } from '../../src/lib/clock.ts'
import { silentLogger } from '../../src/lib/logger.ts'

describe('exclusive jobs', () => {
  test('run through the runner; skipped while another instance holds the job; plain jobs do not ask', async () => {
    const held = new Set<string>()
    const asked: string[] = []
    const runner: ExclusiveRunner = async (job, fn) => {
      asked.push(job)
      if (held.has(job)) return { ran: false }
      return { ran: true, value: await fn() }
    }
    const clock = new FakeClock()
    const scheduler = new Scheduler(clock, silentLogger, undefined, runner)
    let sweeps = 0
    let dispatches = 0
    scheduler.add('sweep', 1000, () => ({ swept: ++sweeps }), { exclusive: true })
    scheduler.add('dispatch', 1000, () => ++dispatches)

    expect(await scheduler.runNow('sweep')).toEqual({ swept: 1 })
    held.add('sweep')
    expect(await scheduler.runNow('sweep')).toEqual({ skipped: 'running on another instance' })
    expect(sweeps).toBe(1)
    expect(scheduler.hasFailures()).toBe(false)
    expect(await scheduler.runNow('dispatch')).toBe(1)
    expect(asked).toEqual(['sweep', 'sweep'])
    expect((scheduler.report().sweep as { runs: number }).runs).toBe(2)
  })
})
