/** WAL checkpoints run on a worker thread; the main connection's automatic checkpoint is off meanwhile. */
import { expect, test } from 'bun:test'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { silentLogger } from '../../src/lib/logger.ts'
import { Checkpointer } from '../../src/storage/sqlite/checkpointer.ts'
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
