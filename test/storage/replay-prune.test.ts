/**
 * The replay log and the WALs stay flat under a sustained signed-request rate: every sweep forgets
 * everything expired (here 2,000 signatures per second, 6,000 per sweep, more than the 5,000 one
 * statement of the relay's prune job may delete elsewhere), and the WAL is emptied once writes stop.
 * Time is simulated; the files are real.
 */
import { afterAll, expect, test } from 'bun:test'
import { mkdirSync, rmSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { silentLogger } from '../../src/lib/logger.ts'
import { JOURNAL_SIZE_LIMIT_BYTES } from '../../src/storage/sqlite/database.ts'
import { SqliteStorage } from '../../src/storage/sqlite/sqlite-storage.ts'
import { tempDir } from '../support/harness.ts'

const RATE_PER_S = 2000
const TOLERANCE_MS = 5000
const SWEEP_MS = 3000
const SECONDS = 90
/** Real milliseconds per simulated second, at least: the run is 40× faster than real time, whatever the machine. */
const REAL_MS_PER_S = 25
/** What the relay's prune job passes (relay.ts). */
const PRUNE_BATCH = 5000

const dir = tempDir()
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const size = (path: string) => {
  try {
    return statSync(path).size
  } catch {
    return 0
  }
}

async function until(cond: () => boolean, ms: number) {
  const end = performance.now() + ms
  while (!cond() && performance.now() < end) await Bun.sleep(20)
  return cond()
}

test('rows and WAL stay flat at 2,000 signed requests/s; the WAL is emptied when idle', async () => {
  const T0 = 1_800_000_000_000
  const storage = new SqliteStorage({ path: join(dir, 'relay.db'), lockWaitMs: 1000, logger: silentLogger, now: T0 })
  const samples: { t: number; rows: number; copies: number; replayWal: number; relayWal: number }[] = []
  const copies = () => (storage.writer.query('SELECT count(*) AS n FROM replay_log').get() as { n: number }).n
  let n = 0
  for (let s = 1; s <= SECONDS; s++) {
    const turnStarted = performance.now()
    const now = T0 + s * 1000
    const pending: Promise<unknown>[] = []
    for (let i = 0; i < RATE_PER_S; i++) {
      const reservation = await storage.replay.reserve(`sig-${(n++).toString(36).padStart(18, '0')}`, now + 2 * TOLERANCE_MS)
      pending.push(reservation!.durable)
    }
    // the requests' own writes on relay.db, in the same turns
    for (let i = 0; i < 100; i++) pending.push(storage.state.setNumber(`k${i}`, now))
    await Promise.all(pending)
    if ((s * 1000) % SWEEP_MS === 0) {
      await storage.replay.prune(now, PRUNE_BATCH)
      samples.push({ t: s, rows: storage.replay.rows(), copies: copies(), replayWal: size(join(dir, 'replay.db-wal')), relayWal: size(join(dir, 'relay.db-wal')) })
    }
    // the checkpoint worker runs on real timers: each simulated second takes at least REAL_MS_PER_S,
    // so a fast machine does not finish the run before the worker has started
    await Bun.sleep(Math.max(2, REAL_MS_PER_S - (performance.now() - turnStarted)))
  }
  // one line per sweep, shown when an expectation below fails
  const shown = samples.map((x) => `${x.t}s rows ${x.rows} copies ${x.copies} wal ${x.replayWal}/${x.relayWal}`).join('; ')
  const third = Math.floor(samples.length / 3)
  const max = (xs: number[]) => Math.max(...xs)
  const middle = samples.slice(third, 2 * third)
  const last = samples.slice(2 * third)
  // the window holds 2 × tolerance of entries, plus one sweep interval
  const bound = (RATE_PER_S * (2 * TOLERANCE_MS + SWEEP_MS)) / 1000
  expect(max(samples.map((x) => x.rows))).toBeLessThanOrEqual(bound)
  expect(max(last.map((x) => x.rows))).toBeLessThanOrEqual(max(middle.map((x) => x.rows)))
  expect(storage.replay.size).toBeLessThanOrEqual(bound)
  // the copies relay.db's commits carry (entries not yet durable in replay.db) are pruned alike
  expect(max(samples.map((x) => x.copies))).toBeLessThanOrEqual(bound)
  // the WALs: a checkpoint's worth, never a run's worth (the run wrote far more than the bound below)
  for (const key of ['replayWal', 'relayWal'] as const) {
    expect({ key, max: max(samples.map((x) => x[key])) <= JOURNAL_SIZE_LIMIT_BYTES + 4 * 1024 * 1024, shown }).toEqual({ key, max: true, shown })
    expect({ key, flat: max(last.map((x) => x[key])) <= max(middle.map((x) => x[key])) + 4 * 1024 * 1024, shown }).toEqual({ key, flat: true, shown })
  }
  // idle: the replay log's WAL, grown past the point where its checkpoints move to a worker, is emptied
  expect(storage.replay.report().checkpoints.on_worker).toBe(true)
  expect(await until(() => size(join(dir, 'replay.db-wal')) === 0 && storage.replay.report().checkpoints.truncated > 0, 5000)).toBe(true)
  console.log(JSON.stringify({ reservations: n, last: samples.at(-1), replay_checkpoints: storage.replay.report().checkpoints }))
  await storage.close()
}, 60_000)

test('rows that expired while the relay was stopped are deleted by the first prune after a start', async () => {
  const T0 = 1_800_000_000_000
  const path = join(dir, 'restart', 'relay.db')
  mkdirSync(join(dir, 'restart'), { recursive: true })
  const first = new SqliteStorage({ path, lockWaitMs: 1000, logger: silentLogger, now: T0 })
  await Promise.all(Array.from({ length: 12 }, async (_, i) => (await first.replay.reserve(`stopped-${i}`, T0 + 1000))!.durable))
  await first.close()
  const second = new SqliteStorage({ path, lockWaitMs: 1000, logger: silentLogger, now: T0 + 2000 })
  expect(second.replay.rows()).toBe(12)
  expect(second.replay.size).toBe(0) // not loaded: expired
  expect(await second.replay.prune(T0 + 2000, 5)).toBe(12) // in statements of 5 rows
  expect(second.replay.rows()).toBe(0)
  await second.close()
})
