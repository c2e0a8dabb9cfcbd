/**
 * Cluster mode: what a 201 survives is PostgreSQL's synchronous_commit, read at start-up on the
 * relay's own connection and logged (a warning when it is off).
 */
import { afterAll, describe, expect, test } from 'bun:test'
import { SQL } from 'bun'
import { FakeClock } from '../../src/lib/clock.ts'
import { createLogger } from '../../src/lib/logger.ts'
import { openPostgres, synchronousCommitPromise } from '../../src/storage/postgres/open-postgres.ts'
import { postgresRunner, sharedPostgres } from '../support/postgres.ts'

const bin = postgresRunner('PostgreSQL durability check')

test('each synchronous_commit setting has its promise; off is a warning', () => {
  expect(synchronousCommitPromise('on')).toMatchObject({ level: 'info', promise: expect.stringContaining('power loss of the database server') })
  expect(synchronousCommitPromise('off')).toMatchObject({ level: 'warn', promise: expect.stringContaining('may lose') })
  expect(synchronousCommitPromise('local').level).toBe('info')
  expect(synchronousCommitPromise('bogus').level).toBe('warn')
})

describe.skipIf(bin === null)('start-up on PostgreSQL', () => {
  const closing: (() => Promise<void>)[] = []
  afterAll(async () => {
    for (const close of closing) await close()
  })

  async function openLogged(url: string) {
    const lines: { level: string; msg: string; synchronous_commit?: string; a_201_survives?: string }[] = []
    const logger = createLogger('info', (line) => lines.push(JSON.parse(line)))
    const { storage } = await openPostgres(url, { logger, clock: new FakeClock(), lockWaitMs: 1000 })
    closing.push(() => storage.close())
    return lines.find((l) => l.msg === 'database durability')
  }

  test('the setting of the connection is logged: on by default, a warning once the database turns it off', async () => {
    const url = await (await sharedPostgres(bin as string)).createDatabase('durability')
    expect(await openLogged(url)).toMatchObject({ level: 'info', synchronous_commit: 'on' })
    const admin = new SQL({ url, max: 1 })
    const db = new URL(url).pathname.slice(1)
    await admin.unsafe(`ALTER DATABASE "${db}" SET synchronous_commit = off`)
    await admin.close()
    expect(await openLogged(url)).toMatchObject({ level: 'warn', synchronous_commit: 'off', a_201_survives: expect.stringContaining('may lose') })
  }, 60_000)
})
