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

test('caughtUp: a WAL holding more than the restart size is caught up with no RESTART, and started afresh by the worker; a small one is left alone', async () => {
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
    expect(cp.report()).toMatchObject({ catchups: 1, restarts: 0, started_afresh: 1 })
    // the worker's own write started the WAL from its start (and synced its header), not the next commit here
    expect(walContentBytes(path, 4096)).toBe(4096 + 24)
    // it took the write lock for a moment: the writer is told when it is free
    expect(writersFree).toBeGreaterThanOrEqual(1)
    // nothing was lost or changed by it
    expect(c.query("SELECT count(*) AS n FROM relay_state WHERE key LIKE 'k%'").get()).toEqual({ n: 700 })
    c.transaction(() => insert.run('after', 'z'))()
    // a WAL of a few frames now: nothing to wait for, no checkpoint
    await cp.caughtUp(5000)
    expect(cp.report()).toMatchObject({ catchups: 1, restarts: 0, started_afresh: 1 })
  } finally {
    await cp.stop()
    c.close()
    rmSync(dir, { recursive: true, force: true })
  }
})

test('a WAL still past the restart size a tick after catching up gets a RESTART; once writes stop it is truncated, once', async () => {
  const dir = tempDir()
  const path = join(dir, 'relay.db')
  const c = openDatabase(path)
  const cp = new Checkpointer(c, path, silentLogger, 30).start()
  try {
    const insert = c.prepare('INSERT OR REPLACE INTO relay_state (key, value) VALUES (?, ?)')
    for (let i = 0; i < 200; i++) c.transaction(() => insert.run(`k${i}`, 'x'.repeat(8000)))()
    await until(() => cp.report().on_worker)
    // a reader in the middle of a read transaction: no checkpoint may copy the frames written after its
    // snapshot, so the catch-up cannot finish, and the next tick finds the WAL still past the size
    const reader = openDatabase(path)
    reader.run('BEGIN')
    reader.query('SELECT count(*) FROM relay_state').get()
    for (let i = 0; i < 700; i++) c.transaction(() => insert.run(`k${i}`, 'y'.repeat(8000)))()
    await until(() => cp.report().restarts >= 1)
    expect(cp.report().catchups).toBeGreaterThanOrEqual(1)
    expect(cp.report().started_afresh).toBe(0)
    expect(walContentBytes(path, 4096)).toBeGreaterThan(RESTART_AFTER_BYTES)
    reader.run('COMMIT')
    reader.close()
    // with the reader gone, the WAL starts afresh and, idle, is truncated to the worker's one frame
    await until(() => cp.report().truncated >= 1 && walContentBytes(path, 4096) <= 4096 + 24)
    const truncations = cp.report().truncations
    await Bun.sleep(400)
    // an emptied WAL is not truncated again and again while the relay stays idle
    expect(cp.report().truncations).toBe(truncations)
  } finally {
    await cp.stop()
    c.close()
    rmSync(dir, { recursive: true, force: true })
  }
})
