/**
 * Which storage the in-process test relays run on. `RELAY_TEST_BACKEND=postgres` puts every relay of
 * `startTestRelay` on a database of its own on a real PostgreSQL server (test/support/postgres.ts: one
 * server per test process, each database copied from a migrated template, dropped on close); unset, the
 * embedded SQLite file in the relay's data directory. `npm test` runs the API suites once on each
 * (scripts/test-postgres.ts). Tests of SQLite internals (they read or write the file directly) say so
 * with `sqliteOnly`, and are skipped on PostgreSQL.
 */
import { SQL } from 'bun'
import type { Clock } from '../../src/lib/clock.ts'
import type { Logger } from '../../src/lib/logger.ts'
import type { OpenedStorage } from '../../src/storage/open-storage.ts'
import { openPostgres } from '../../src/storage/postgres/open-postgres.ts'
import { migrate } from '../../src/storage/postgres/migrate.ts'
import { test } from 'bun:test'
import { findPostgres, sharedPostgres, type TestPostgres } from './postgres.ts'

export type TestBackend = 'sqlite' | 'postgres'

export const TEST_BACKEND: TestBackend = process.env.RELAY_TEST_BACKEND === 'postgres' ? 'postgres' : 'sqlite'
export const ON_POSTGRES = TEST_BACKEND === 'postgres'

/** A test of SQLite internals (it reads or writes the relay's file directly): skipped on PostgreSQL. */
export const sqliteOnly = test.skipIf(ON_POSTGRES)

const TEMPLATE = 'relay_test_template'

let server: Promise<{ pg: TestPostgres; admin: SQL }> | null = null
let databases = 0

function postgresServer(): Promise<{ pg: TestPostgres; admin: SQL }> {
  if (!server) {
    server = (async () => {
      const bin = findPostgres()
      if (!bin) throw new Error('RELAY_TEST_BACKEND=postgres, but PostgreSQL is not installed (bash .ci/run installs it)')
      const pg = await sharedPostgres(bin)
      const admin = new SQL({ url: pg.url, max: 1 })
      // a migrated template: CREATE DATABASE … TEMPLATE copies it in a few milliseconds
      await admin.unsafe(`CREATE DATABASE "${TEMPLATE}"`)
      const template = new SQL({ url: pg.url.replace(/\/postgres$/, `/${TEMPLATE}`), max: 1 })
      try {
        await migrate(template)
      } finally {
        await template.close()
      }
      return { pg, admin }
    })()
  }
  return server
}

export interface TestDatabase {
  url: string
  /** One statement with `?` placeholders; bigints as numbers, booleans as 1/0 (as SQLite answers). */
  query<T>(text: string, params?: unknown[]): Promise<T[]>
  drop(): Promise<void>
}

/** Starts the test server and its template now (a preload does, so that no first test pays for it). */
export async function preparePostgres(): Promise<void> {
  await postgresServer()
}

/** A fresh, migrated database of its own on the test server. */
export async function testDatabase(): Promise<TestDatabase> {
  const { pg, admin } = await postgresServer()
  const name = `relay_${process.pid}_${++databases}`
  await admin.unsafe(`CREATE DATABASE "${name}" TEMPLATE "${TEMPLATE}"`)
  const url = pg.url.replace(/\/postgres$/, `/${name}`)
  let direct: SQL | null = null
  return {
    url,
    async query<T>(text: string, params: unknown[] = []) {
      direct ??= new SQL({ url, max: 1, bigint: true })
      let n = 0
      const result = (await direct.unsafe(text.replace(/\?/g, () => `$${++n}`), params as any[])) as Record<string, unknown>[]
      return [...result].map((row) => {
        const out: Record<string, unknown> = {}
        for (const [k, v] of Object.entries(row)) out[k] = typeof v === 'bigint' ? Number(v) : typeof v === 'boolean' ? Number(v) : v
        return out as T
      })
    },
    drop: async () => {
      await direct?.close()
      await admin.unsafe(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)
    },
  }
}

/** Opens relay storage on a test database (what openRelay does for RELAY_DATABASE_URL). */
export function openTestPostgres(url: string, opts: { logger: Logger; clock: Clock; lockWaitMs: number }): Promise<OpenedStorage> {
  return openPostgres(url, { ...opts, poolSize: 4 })
}
