/**
 * The storage backends the contract suite (storage.test.ts) runs against: the embedded SQLite file and
 * PostgreSQL (a real server started by test/support/postgres.ts; skipped with one line without one).
 * Each `open` gives a fresh, empty storage of its own.
 */
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { silentLogger } from '../../src/lib/logger.ts'
import { FakeClock } from '../../src/lib/clock.ts'
import type { Storage } from '../../src/services/ports.ts'
import type { OpenedStorage } from '../../src/storage/open-storage.ts'
import { openPostgres } from '../../src/storage/postgres/open-postgres.ts'
import { SqliteStorage } from '../../src/storage/sqlite/sqlite-storage.ts'
import { tempDir } from '../support/harness.ts'
import { postgresRunner, sharedPostgres } from '../support/postgres.ts'

export interface Opened {
  storage: Storage
  opened?: OpenedStorage
  close(): Promise<void>
}

export interface Backend {
  name: 'sqlite' | 'postgres'
  available: boolean
  /** Several processes or instances may share the storage (cluster semantics apply). */
  shared: boolean
  /** Starts what the backend needs once (a server start can take seconds under load; give it a long hook timeout). */
  prepare(): Promise<void>
  open(): Promise<Opened>
}

/** Hook timeout for `prepare`: a PostgreSQL server's first start on a loaded machine. */
export const PREPARE_TIMEOUT_MS = 60_000

export const sqliteBackend: Backend = {
  name: 'sqlite',
  available: true,
  shared: false,
  async prepare() {},
  async open() {
    const dir = tempDir('relay-contract-')
    const storage = new SqliteStorage({ path: join(dir, 'relay.db'), lockWaitMs: 1000, logger: silentLogger, now: new FakeClock().now() })
    return {
      storage,
      async close() {
        await storage.close()
        rmSync(dir, { recursive: true, force: true })
      },
    }
  },
}

const pgBin = postgresRunner('storage contract against PostgreSQL')
let databases = 0

export const postgresBackend: Backend = {
  name: 'postgres',
  available: pgBin !== null,
  shared: true,
  async prepare() {
    await sharedPostgres(pgBin as string)
  },
  async open() {
    const pg = await sharedPostgres(pgBin as string)
    const url = await pg.createDatabase(`contract_${++databases}`)
    const opened = await openPostgres(url, { logger: silentLogger, clock: new FakeClock(), lockWaitMs: 1000 })
    return {
      storage: opened.storage,
      opened,
      close: () => opened.storage.close(),
    }
  },
}

export const BACKENDS: Backend[] = [sqliteBackend, postgresBackend]
