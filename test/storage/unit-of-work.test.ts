/**
 * Units of work on SQLite: grouped commits, one failing unit rolled back alone, and a database locked by
 * another process answered with 503 (never a stalled event loop) while reads and health keep working.
 */
import { Database } from 'bun:sqlite'
import { afterEach, describe, expect, test } from 'bun:test'
import { join } from 'node:path'
import { rmSync } from 'node:fs'
import { silentLogger } from '../../src/lib/logger.ts'
import { SqliteStorage } from '../../src/storage/sqlite/sqlite-storage.ts'
import { expectError, startTestRelay, tempDir, type TestRelay } from '../support/harness.ts'

const dirs: string[] = []
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})

function open(lockWaitMs = 200) {
  const dir = tempDir()
  dirs.push(dir)
  const path = join(dir, 'relay.db')
  return { storage: new SqliteStorage({ path, lockWaitMs, logger: silentLogger, now: 0 }), path }
}

/** Another process's write lock, as `relay admin` or an sqlite3 shell would hold it. */
function holdLock(path: string): () => void {
  const other = new Database(path)
  other.run('BEGIN EXCLUSIVE')
  return () => {
    other.run('ROLLBACK')
    other.close()
  }
}

describe('grouped commits', () => {
  test('units queued in one turn share one commit and all resolve after it', async () => {
    const { storage } = open()
    const before = storage.uow.stats.commits
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => storage.transaction(async (tx) => (await tx.state.setNumber(`k${i}`, i), i))))
    expect(results).toEqual(Array.from({ length: 20 }, (_, i) => i))
    expect(storage.uow.stats.commits - before).toBe(1)
    for (let i = 0; i < 20; i++) expect(await storage.state.getNumber(`k${i}`)).toBe(i)
    await storage.close()
  })

  test('a failing unit is rolled back alone; the others of its group commit', async () => {
    const { storage } = open()
    const ok = storage.transaction(async (tx) => tx.state.setNumber('a', 1))
    const bad = storage.transaction(async (tx) => {
      await tx.state.setNumber('b', 2)
      throw new Error('refused')
    })
    const ok2 = storage.transaction(async (tx) => tx.state.setNumber('c', 3))
    await ok
    await expect(bad).rejects.toThrow('refused')
    await ok2
    expect(await storage.state.getNumber('a')).toBe(1)
    expect(await storage.state.getNumber('b')).toBeNull()
    expect(await storage.state.getNumber('c')).toBe(3)
    await storage.close()
  })

  test('a group where nothing fails runs each unit once, without a second pass', async () => {
    const { storage } = open()
    const runs = new Map<number, number>()
    await Promise.all(Array.from({ length: 10 }, (_, i) => storage.transaction(async (tx) => {
      runs.set(i, (runs.get(i) ?? 0) + 1)
      await tx.state.setNumber(`n${i}`, i)
    })))
    expect([...runs.values()]).toEqual(Array(10).fill(1))
    expect(storage.uow.stats.reruns).toBe(0)
    await storage.close()
  })

  test('a unit failing after its own writes: the group runs again, the failing unit leaves nothing, the others commit once', async () => {
    const { storage } = open()
    const runs: string[] = []
    const unit = (name: string, fail = false) => storage.transaction(async (tx) => {
      runs.push(name)
      await tx.state.setNumber(name, runs.length)
      await tx.state.setNumber(`${name}-2`, runs.length)
      if (fail) throw new Error(`refused ${name}`)
      return name
    })
    const results = await Promise.allSettled([unit('a'), unit('b', true), unit('c'), unit('d')])
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled'])
    expect((results[1] as PromiseRejectedResult).reason.message).toBe('refused b')
    // the optimistic pass stopped at b; the careful pass ran all four
    expect(runs).toEqual(['a', 'b', 'a', 'b', 'c', 'd'])
    expect(storage.uow.stats.reruns).toBe(1)
    expect(await storage.health()).toMatchObject({ status: 'ok', group_reruns: 1 })
    expect(await storage.state.getNumber('b')).toBeNull()
    expect(await storage.state.getNumber('b-2')).toBeNull()
    // each committed value is the careful pass's own
    expect(await storage.state.getNumber('a')).toBe(3)
    expect(await storage.state.getNumber('c')).toBe(5)
    expect(await storage.state.getNumber('d-2')).toBe(6)
    await storage.close()
  })

  test('after a failure the next groups run carefully at once (one pass each)', async () => {
    const { storage } = open()
    const failing = () => Promise.allSettled([
      storage.transaction(async (tx) => tx.state.setNumber('x', 1)),
      storage.transaction(async () => {
        throw new Error('no')
      }),
    ])
    await failing()
    expect(storage.uow.stats.reruns).toBe(1)
    let runs = 0
    const group = await Promise.allSettled([
      storage.transaction(async (tx) => (runs++, tx.state.setNumber('y', 2))),
      storage.transaction(async () => {
        runs++
        throw new Error('no')
      }),
    ])
    expect(group.map((r) => r.status)).toEqual(['fulfilled', 'rejected'])
    expect(runs).toBe(2)
    expect(storage.uow.stats.reruns).toBe(1)
    expect(await storage.state.getNumber('y')).toBe(2)
    await storage.close()
  })

  test('a statement refused by a constraint inside a group leaves the other units committed', async () => {
    const { storage } = open()
    const db = storage.writer
    db.run('CREATE TABLE uow_probe (k TEXT PRIMARY KEY)')
    const insert = db.prepare('INSERT INTO uow_probe (k) VALUES (?)')
    const results = await Promise.allSettled(['p', 'q', 'p', 'r'].map((k) => storage.transaction(async () => insert.run(k))))
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled'])
    expect(storage.reader.query('SELECT k FROM uow_probe ORDER BY k').all()).toEqual([{ k: 'p' }, { k: 'q' }, { k: 'r' }])
    await storage.close()
  })

  test('reads outside a unit see committed data only', async () => {
    const { storage } = open()
    let seenInside: number | null = -1
    await storage.transaction(async (tx) => {
      await tx.state.setNumber('x', 7)
      // the reader connection: the write above is not committed yet
      seenInside = await storage.state.getNumber('x')
    })
    expect(seenInside).toBeNull()
    expect(await storage.state.getNumber('x')).toBe(7)
    await storage.close()
  })
})

describe('another process holds the write lock', () => {
  test('a write waiting for the lock tries again the moment the lock is let go in this process, not at its next timer', async () => {
    const { storage, path } = open(2000)
    const release = holdLock(path)
    let done = false
    const write = storage.transaction(async (tx) => tx.state.setNumber('waited', 1)).then(() => (done = true))
    // past the first retries: the write now sleeps on a 20-50 ms timer
    await Bun.sleep(40)
    expect(done).toBe(false)
    release()
    storage.uow.retryLockNow()
    // the write runs and commits in the same turn, long before its timer
    await new Promise((r) => setImmediate(r))
    expect(done).toBe(true)
    await write
    expect(await storage.state.getNumber('waited')).toBe(1)
    // one write found the lock taken (an operator's health figure)
    expect(await storage.health()).toMatchObject({ lock_waits: 1, lock_timeouts: 0 })
    await storage.close()
  })

  test('writes fail with 503 and Retry-After after the lock wait; reads go on; writes resume after', async () => {
    const { storage, path } = open(150)
    await storage.state.setNumber('before', 1)
    const release = holdLock(path)
    try {
      await expect(storage.state.setNumber('during', 2)).rejects.toMatchObject({ code: 'service_unavailable', headers: { 'Retry-After': '1' } })
      expect(await storage.state.getNumber('before')).toBe(1)
      expect(await storage.ready()).toMatch(/locked|not writable/)
      expect(storage.uow.stats.lock_timeouts).toBeGreaterThan(0)
    } finally {
      release()
    }
    await storage.state.setNumber('after', 3)
    expect(await storage.state.getNumber('after')).toBe(3)
    expect(await storage.ready()).toBeNull()
    await storage.close()
  })

  test('a write queued while the lock is held succeeds once it is released within the wait', async () => {
    const { storage, path } = open(2000)
    const release = holdLock(path)
    const pending = storage.state.setNumber('k', 5)
    await Bun.sleep(30)
    release()
    await pending
    expect(await storage.state.getNumber('k')).toBe(5)
    await storage.close()
  })

  test('over HTTP: health answers, reads answer, a send gets 503 in the envelope, then works again', async () => {
    const t: TestRelay = await startTestRelay({ database: { lockWaitMs: 150 }, rateLimits: { sendPerMin: 0, pollPerMin: 0, requestsPerMin: 0 } })
    try {
      const [a, b] = [t.client(), t.client()]
      await a.getAgent()
      await b.getAgent()
      const release = holdLock(t.relay.paths.database)
      try {
        expect((await t.handle(new Request('http://relay.test/v1/health'))).status).toBe(200)
        expect((await t.handle(new Request('http://relay.test/v1/health/live'))).status).toBe(200)
        expect((await t.handle(new Request('http://relay.test/v1/health/ready'))).status).toBe(503)
        const res = await a.transport.send('POST', '/v1/messages', { recipient_key: b.publicKey, body: { n: 1 } })
        const err = await expectError(res, 503, 'service_unavailable')
        expect(err.message).toMatch(/busy/)
        expect(res.headers.get('retry-after')).toBe('1')
      } finally {
        release()
      }
      expect((await a.send({ recipient_key: b.publicKey, body: { n: 2 } })).status).toBe('sent')
      expect((await b.poll()).messages.map((m) => m.body)).toEqual([{ n: 2 }])
    } finally {
      await t.close()
    }
  })
})
