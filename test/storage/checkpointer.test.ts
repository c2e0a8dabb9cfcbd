/** WAL checkpoints run on a worker thread; the main connection's automatic checkpoint is off meanwhile. */
import { expect, test } from 'bun:test'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { silentLogger } from '../../src/lib/logger.ts'
import { Checkpointer, RESTART_AFTER_BYTES, walContentBytes } from '../../src/storage/sqlite/checkpointer.ts'
import { openDatabase } from '../../src/storage/sqlite/database.ts'
import { tempDir } from '../support/harness.ts'

const autocheckpoint = (c: { query: (s: string) => { get: () => unknown } }) =>
  (c.query('PRAGMA wal_autocheckpoint').get() as { wal_autocheckpoint: number }).wal_autocheckpoint

async function until(cond: () => boolean, ms = 5000) {
  const end = performance.now() + ms
  while (!cond()) {
    if (performance.now() > end) throw new Error('condition not met in time')
    await Bun.sleep(10)
  }
}

test('checkpoints move to the worker and come back when it stops', async () => {
  const dir = tempDir()
  const path = join(dir, 'relay.db')
  const c = openDatabase(path)
  try {
    expect(autocheckpoint(c)).toBe(1000)
    c.run('PRAGMA wal_checkpoint(TRUNCATE)')
    const cp = new Checkpointer(c, path, silentLogger, 20).start()
    // an idle database keeps SQLite's own checkpoint and no worker thread
    await Bun.sleep(50)
    expect(cp.report().on_worker).toBe(false)
    expect(autocheckpoint(c)).toBe(1000)
    // the worker starts once the WAL has grown past 1 MiB
    const insert = c.prepare('INSERT INTO relay_state (key, value) VALUES (?, ?)')
    for (let i = 0; i < 200; i++) c.transaction(() => insert.run(`k${i}`, 'x'.repeat(8000)))()
    await until(() => cp.report().on_worker)
    expect(autocheckpoint(c)).toBe(0)
    for (let i = 200; i < 400; i++) c.transaction(() => insert.run(`k${i}`, 'x'.repeat(2000)))()
    await until(() => cp.report().runs > 2)
    await cp.stop()
    expect(cp.report().on_worker).toBe(false)
    expect(autocheckpoint(c)).toBe(1000)
  } finally {
    c.close()
    rmSync(dir, { recursive: true, force: true })
  }
})

/**
 * A database whose checkpoints run on the worker (its WAL grown past the worker's start size first),
 * handed to `fn` with a way to write `rows` rows of 8,000 bytes each, in a transaction each.
 */
async function withWorker(intervalMs: number, fn: (t: { path: string; cp: Checkpointer; fill: (rows: number, char: string) => void; writersFree: () => number }) => Promise<void>) {
  const dir = tempDir()
  const path = join(dir, 'relay.db')
  const c = openDatabase(path)
  let writersFree = 0
  const cp = new Checkpointer(c, path, silentLogger, intervalMs).onWritersFree(() => writersFree++).start()
  const insert = c.prepare('INSERT OR REPLACE INTO relay_state (key, value) VALUES (?, ?)')
  const fill = (rows: number, char: string) => {
    for (let i = 0; i < rows; i++) c.transaction(() => insert.run(`k${i}`, char.repeat(8000)))()
  }
  try {
    fill(200, 'x')
    await until(() => cp.report().on_worker)
    await fn({ path, cp, fill, writersFree: () => writersFree })
  } finally {
    await cp.stop()
    c.close()
    rmSync(dir, { recursive: true, force: true })
  }
}

test('caughtUp: a WAL holding more than the restart size is caught up without holding writers off, and the next write starts it afresh; a small one is left alone', async () => {
  // a long interval: the ticks stay out of the way, only caughtUp asks for checkpoints
  await withWorker(60_000, async ({ path, cp, fill, writersFree }) => {
    // over the restart size (4 MiB of frames)
    fill(700, 'y')
    expect(walContentBytes(path, 4096)).toBeGreaterThan(RESTART_AFTER_BYTES)
    await cp.caughtUp(5000)
    expect(cp.report()).toMatchObject({ catchups: 1, restarts: 0 })
    // no checkpoint held writers off
    expect(writersFree()).toBe(0)
    // every frame was copied: the next write starts the WAL from its start
    fill(1, 'z')
    expect(walContentBytes(path, 4096)).toBeLessThan(64 * 1024)
    // a WAL of a few frames now: nothing to wait for, no checkpoint
    await cp.caughtUp(5000)
    expect(cp.report()).toMatchObject({ catchups: 1, restarts: 0 })
  })
})

test('a WAL still past the restart size a tick after catching up gets a RESTART, which tells the writer when it ends', async () => {
  await withWorker(30, async ({ path, cp, fill, writersFree }) => {
    // past the size, then no write: a catch-up copies everything, but only a write would start the WAL
    // afresh, so the next tick still finds it past the size and runs a RESTART
    fill(700, 'y')
    await until(() => cp.report().restarts >= 1)
    expect(cp.report().catchups).toBeGreaterThanOrEqual(1)
    expect(writersFree()).toBeGreaterThanOrEqual(1)
    fill(1, 'z')
    expect(walContentBytes(path, 4096)).toBeLessThan(64 * 1024)
  })
})

test('a WAL that started afresh since the last tick and is past the restart size again is caught up again, not RESTARTed', async () => {
  // ticks are driven by hand here: a long interval keeps the timer out of the way
  await withWorker(60_000, async ({ path, cp, fill }) => {
    const tick = () => (cp as unknown as { tick: () => void }).tick()
    fill(700, 'y')
    tick()
    await until(() => cp.report().catchups === 1)
    // the next write starts the WAL afresh; then it grows past the size again, to less than before
    const before = walContentBytes(path, 4096)
    fill(250, 'z')
    expect(walContentBytes(path, 4096)).toBeGreaterThan(RESTART_AFTER_BYTES)
    expect(walContentBytes(path, 4096)).toBeLessThan(before)
    tick()
    await until(() => cp.report().catchups === 2)
    expect(cp.report().restarts).toBe(0)
  })
}, 30_000)
