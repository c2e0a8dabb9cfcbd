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

test('caughtUp: a WAL holding more than the restart size is caught up without holding writers off, and the next write starts it afresh; a small one is left alone', async () => {
  const dir = tempDir()
  const path = join(dir, 'relay.db')
  const c = openDatabase(path)
  // a long interval: the ticks stay out of the way, only caughtUp asks for checkpoints
  let writersFree = 0
  const cp = new Checkpointer(c, path, silentLogger, 60_000).onWritersFree(() => writersFree++).start()
  try {
    const insert = c.prepare('INSERT OR REPLACE INTO relay_state (key, value) VALUES (?, ?)')
    for (let i = 0; i < 200; i++) c.transaction(() => insert.run(`k${i}`, 'x'.repeat(8000)))()
    await until(() => cp.report().on_worker)
    // over the restart size (4 MiB of frames)
    for (let i = 0; i < 700; i++) c.transaction(() => insert.run(`k${i}`, 'y'.repeat(8000)))()
    expect(walContentBytes(path, 4096)).toBeGreaterThan(RESTART_AFTER_BYTES)
    await cp.caughtUp(5000)
    expect(cp.report()).toMatchObject({ catchups: 1, restarts: 0 })
    // no checkpoint held writers off
    expect(writersFree).toBe(0)
    // every frame was copied: the next write starts the WAL from its start
    c.transaction(() => insert.run('after', 'z'))()
    expect(walContentBytes(path, 4096)).toBeLessThan(64 * 1024)
    // a WAL of a few frames now: nothing to wait for, no checkpoint
    await cp.caughtUp(5000)
    expect(cp.report()).toMatchObject({ catchups: 1, restarts: 0 })
  } finally {
    await cp.stop()
    c.close()
    rmSync(dir, { recursive: true, force: true })
  }
})

test('a WAL still past the restart size a tick after catching up gets a RESTART, which tells the writer when it ends', async () => {
  const dir = tempDir()
  const path = join(dir, 'relay.db')
  const c = openDatabase(path)
  let writersFree = 0
  const cp = new Checkpointer(c, path, silentLogger, 30).onWritersFree(() => writersFree++).start()
  try {
    const insert = c.prepare('INSERT OR REPLACE INTO relay_state (key, value) VALUES (?, ?)')
    for (let i = 0; i < 200; i++) c.transaction(() => insert.run(`k${i}`, 'x'.repeat(8000)))()
    await until(() => cp.report().on_worker)
    // past the size, then no write: a catch-up copies everything, but only a write would start the WAL
    // afresh, so the next tick still finds it past the size and runs a RESTART
    for (let i = 0; i < 700; i++) c.transaction(() => insert.run(`k${i}`, 'y'.repeat(8000)))()
    await until(() => cp.report().restarts >= 1)
    expect(cp.report().catchups).toBeGreaterThanOrEqual(1)
    expect(writersFree).toBeGreaterThanOrEqual(1)
    c.transaction(() => insert.run('after', 'z'))()
    expect(walContentBytes(path, 4096)).toBeLessThan(64 * 1024)
  } finally {
    await cp.stop()
    c.close()
    rmSync(dir, { recursive: true, force: true })
  }
})

test('a WAL that started afresh since the last tick and is past the restart size again is caught up again, not RESTARTed', async () => {
  const dir = tempDir()
  const path = join(dir, 'relay.db')
  const c = openDatabase(path)
  // ticks are driven by hand here: a long interval keeps the timer out of the way
  const cp = new Checkpointer(c, path, silentLogger, 60_000).start()
  const tick = () => (cp as unknown as { tick: () => void }).tick()
  try {
    const insert = c.prepare('INSERT OR REPLACE INTO relay_state (key, value) VALUES (?, ?)')
    for (let i = 0; i < 200; i++) c.transaction(() => insert.run(`k${i}`, 'x'.repeat(8000)))()
    await until(() => cp.report().on_worker)
    for (let i = 0; i < 700; i++) c.transaction(() => insert.run(`k${i}`, 'y'.repeat(8000)))()
    tick()
    await until(() => cp.report().catchups === 1)
    // the next write starts the WAL afresh; then it grows past the size again, to less than before
    const before = walContentBytes(path, 4096)
    for (let i = 0; i < 250; i++) c.transaction(() => insert.run(`k${i}`, 'z'.repeat(8000)))()
    expect(walContentBytes(path, 4096)).toBeGreaterThan(RESTART_AFTER_BYTES)
    expect(walContentBytes(path, 4096)).toBeLessThan(before)
    tick()
    await until(() => cp.report().catchups === 2)
    expect(cp.report().restarts).toBe(0)
  } finally {
    await cp.stop()
    c.close()
    rmSync(dir, { recursive: true, force: true })
  }
}, 30_000)
