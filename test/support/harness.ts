/**
 * The test harness: a real relay on a temp data directory (real SQLite file, real blob dir) with a
 * fake clock, driven in process through `relay.handle(Request)`. With RELAY_TEST_BACKEND=postgres the
 * relay runs on a fresh PostgreSQL database of its own instead (test/support/backend.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { generateKeyPair, keyPairFromSeed, type KeyPair } from '../../src/auth/sign.ts'
import { RelayClient } from '../../src/client/index.ts'
import type { ConfigOverrides } from '../../src/config/config.ts'
import { withOverrides } from '../../src/config/load.ts'
import { FakeClock } from '../../src/lib/clock.ts'
import { silentLogger, type Logger } from '../../src/lib/logger.ts'
import { createRelay, type Relay } from '../../src/relay.ts'
import type { SqliteStorage } from '../../src/storage/sqlite/sqlite-storage.ts'
import { ON_POSTGRES, openTestPostgres, testDatabase } from './backend.ts'

export const BASE_URL = 'http://relay.test'

export interface TestRelay {
  relay: Relay
  clock: FakeClock
  dataDir: string
  /** A client for a new (or given) key pair, signing with the relay's fake clock. */
  client(keys?: KeyPair): RelayClient
  /** Sends a Request through the full pipeline. */
  handle(req: Request): Promise<Response>
  /**
   * Runs one statement on the relay's own database, whichever the backend: `?` placeholders, integers
   * (PostgreSQL bigints too) as numbers, booleans as 1/0 as SQLite has them. For tests that set up or
   * inspect rows the API cannot reach; write SQL both dialects accept (TRUE/FALSE for booleans).
   */
  sql<T = Record<string, any>>(text: string, params?: unknown[]): Promise<T[]>
  /** Another relay on the same data (directory or database) while this one runs: a second process, or a crash's successor. */
  another(): Promise<Relay>
  /** Entries of the replay log (accepted signatures still remembered). */
  replayEntries(): Promise<number>
  /** Stops the relay and opens a new one on the same data directory (a restart). */
  restart(): Promise<void>
  close(): Promise<void>
}

export function tempDir(prefix = 'relay-test-'): string {
  return mkdtempSync(join(tmpdir(), prefix))
}

export async function startTestRelay(
  overrides: ConfigOverrides = {},
  opts: { clock?: FakeClock; logger?: Logger; dataDir?: string; fetch?: typeof fetch } = {},
): Promise<TestRelay> {
  const clock = opts.clock ?? new FakeClock()
  const dataDir = opts.dataDir ?? tempDir()
  const logger = opts.logger ?? silentLogger
  // one database per test relay, kept across restarts (a restart reopens the same data)
  const database = ON_POSTGRES ? await testDatabase() : null
  const config = withOverrides({ dataDir, port: 0, logLevel: 'error', ...overrides })
  if (database) config.database = { ...config.database, url: database.url }
  const make = async () =>
    createRelay(config, {
      clock,
      logger,
      fetch: opts.fetch,
      opened: database ? await openTestPostgres(database.url, { logger, clock, lockWaitMs: config.database.lockWaitMs }) : undefined,
    })
  const t: TestRelay = {
    relay: await make(),
    clock,
    dataDir,
    client: (keys = generateKeyPair()) =>
      new RelayClient({ baseUrl: BASE_URL, keys, fetch: (req) => t.relay.handle(req), now: () => clock.now() }),
    handle: (req) => t.relay.handle(req),
    async sql<T>(text: string, params: unknown[] = []) {
      if (!database) return t.relay.sqlite!.query(text).all(...(params as any[])) as T[]
      return database.query<T>(text, params)
    },
    another: make,
    async replayEntries() {
      if (!database) return (t.relay.storage as SqliteStorage).replay.rows()
      return (await database.query<{ n: number }>('SELECT count(*) AS n FROM replay_log'))[0].n
    },
    async restart() {
      await t.relay.stop()
      t.relay = await make()
    },
    async close() {
      await t.relay.stop()
      await database?.drop()
      rmSync(dataDir, { recursive: true, force: true })
    },
  }
  return t
}

/** The two RFC 8032 test keys used by shared/test-vectors.json. */
export const RFC_KEY_1 = keyPairFromSeed(Buffer.from('9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60', 'hex'))
export const RFC_KEY_2 = keyPairFromSeed(Buffer.from('4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb', 'hex'))

/** Asserts the docs/protocol.md §11 envelope and returns the error object. */
export async function expectError(res: Response, status: number, code: string) {
  const text = await res.text()
  let body: any
  try {
    body = JSON.parse(text)
  } catch {
    throw new Error(`expected a JSON error envelope, got ${res.status}: ${text.slice(0, 200)}`)
  }
  if (res.status !== status || body?.error?.code !== code) {
    throw new Error(`expected ${status} ${code}, got ${res.status} ${text.slice(0, 400)}`)
  }
  const rid = res.headers.get('x-request-id')
  if (!rid || body.error.request_id !== rid || !/^req_/.test(rid)) throw new Error(`request_id mismatch: header ${rid}, body ${body.error.request_id}`)
  if (!('details' in body.error) || typeof body.error.message !== 'string') throw new Error('envelope lacks details or message')
  return body.error as { code: string; message: string; details: any; request_id: string }
}
