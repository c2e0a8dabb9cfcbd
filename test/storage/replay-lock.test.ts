/**
 * Another process holds the write lock of relay.db (as `relay admin`, a backup or an sqlite3 shell
 * would): signed reads keep answering, because their only write — the replay entry — goes to a file
 * of its own; writes answer 503 with Retry-After within the configured wait, not twice it; and the
 * signatures accepted meanwhile are still refused after a restart. And the other way round: a commit
 * of relay.db carries the entries replay.db does not hold yet, so no crash between the two files
 * leaves a request's effects without its entry.
 */
import { afterEach, describe, expect, test } from 'bun:test'
import type { Subprocess } from 'bun'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { silentLogger } from '../../src/lib/logger.ts'
import { SqliteStorage } from '../../src/storage/sqlite/sqlite-storage.ts'
import { expectError, startTestRelay, type TestRelay } from '../support/harness.ts'
import { signed, uniqueTimestamp } from '../support/signed.ts'

const LOCK_WAIT_MS = 1500

/** A second process that takes BEGIN IMMEDIATE on `path` and keeps it until its stdin closes. */
async function lockInOtherProcess(path: string): Promise<() => Promise<void>> {
  const script = `
    import { Database } from 'bun:sqlite'
    const db = new Database(${JSON.stringify(path)})
    db.run('PRAGMA busy_timeout = 5000')
    db.run('BEGIN IMMEDIATE')
    console.log('locked')
    for await (const _ of Bun.stdin.stream()) {}
    db.run('ROLLBACK')
  `
  const child: Subprocess<'pipe', 'pipe', 'inherit'> = Bun.spawn([process.execPath, '-e', script], { stdin: 'pipe', stdout: 'pipe', stderr: 'inherit' })
  const reader = child.stdout.getReader()
  const { value } = await reader.read()
  expect(new TextDecoder().decode(value)).toContain('locked')
  return async () => {
    child.stdin.end()
    await child.exited
  }
}

let t: TestRelay | undefined
afterEach(async () => {
  await t?.close()
  t = undefined
})

describe('relay.db locked by another process', () => {
  test('signed GETs answer 200, sends 503 within the wait, replays are still refused after a restart', async () => {
    t = await startTestRelay({ database: { lockWaitMs: LOCK_WAIT_MS }, rateLimits: { sendPerMin: 0, pollPerMin: 0, requestsPerMin: 0, addressPerMin: 0 } })
    const me = generateKeyPair()
    const peer = generateKeyPair()
    await t.client(me).getAgent()
    await t.client(peer).getAgent()
    const release = await lockInOtherProcess(t.relay.paths.database)
    const accepted: Request[] = []
    try {
      for (let i = 0; i < 5; i++) {
        const req = signed(me, 'GET', `/v1/agents/${peer.publicKey}`, { timestamp: uniqueTimestamp(t.clock.now(), me.publicKey) })
        accepted.push(req.clone() as Request)
        const started = performance.now()
        const res = await t.handle(req)
        expect(res.status).toBe(200)
        // far below the lock wait: the read never waited on relay.db
        expect(performance.now() - started).toBeLessThan(LOCK_WAIT_MS / 2)
      }
      const started = performance.now()
      const res = await t.client(me).transport.send('POST', '/v1/messages', { recipient_key: peer.publicKey, body: { n: 1 } })
      const elapsed = performance.now() - started
      await expectError(res, 503, 'service_unavailable')
      expect(res.headers.get('retry-after')).toBe('1')
      expect(elapsed).toBeGreaterThanOrEqual(LOCK_WAIT_MS - 60)
      expect(elapsed).toBeLessThan(LOCK_WAIT_MS * 1.5)
      // a replay during the lock is refused as well
      await expectError(await t.handle(accepted[0].clone() as Request), 409, 'replay_detected')
    } finally {
      await release()
    }
    // a restart on the same files: the signatures accepted during the lock are refused (each was
    // committed in replay.db before its answer, so a kill -9 would leave them too)
    await t.restart()
    for (const req of accepted) await expectError(await t.handle(req), 409, 'replay_detected')
    // past the timestamps signed above: the client's own look-ups must not sign the same requests again
    t.clock.advance(1000)
    expect((await t.client(me).send({ recipient_key: peer.publicKey, body: { n: 2 } })).status).toBe('sent')
  })

  test('a commit of relay.db carries the replay entries not yet durable in replay.db', async () => {
    t = await startTestRelay({ database: { lockWaitMs: 2000 } })
    const storage = t.relay.storage as SqliteStorage
    // replay.db locked by another process: a reservation cannot be committed there for now
    const release = await lockInOtherProcess(`${t.dataDir}/replay.db`)
    try {
      const reserved = await storage.replay.reserve('held-back-signature-000', t.clock.now() + 60_000)
      reserved!.durable.catch(() => {})
      // a write of the same moment (the request's own effects) commits with the entry in it
      await storage.state.setNumber('effects', 1)
      const copied = storage.writer.query(`SELECT count(*) AS n FROM replay_log WHERE signature = 'held-back-signature-000'`).get() as { n: number }
      expect(copied.n).toBe(1)
      // whatever replay.db never got, a relay opened on these files refuses the signature
      const other = new SqliteStorage({ path: t.relay.paths.database, lockWaitMs: 200, logger: silentLogger, now: t.clock.now(), tool: true })
      try {
        expect(await other.replay.reserve('held-back-signature-000', t.clock.now() + 60_000)).toBeNull()
      } finally {
        await other.close()
      }
    } finally {
      await release()
    }
    // copies are pruned with the rest once expired
    t.clock.advance(61_000)
    await t.relay.scheduler.runNow('prune-replay-cache')
    expect((storage.writer.query('SELECT count(*) AS n FROM replay_log').get() as { n: number }).n).toBe(0)
  })
})
