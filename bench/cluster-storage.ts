/**
 * Storage throughput, PostgreSQL (cluster mode) against the embedded SQLite file, in process: message
 * inserts (each in a transaction of its own, `BENCH_CONCURRENCY` at once) and polls (list a page of an
 * inbox, mark it delivered). Prints figures, asserts nothing.
 *
 *   BENCH_MESSAGES=20000 BENCH_CONCURRENCY=32 bun bench/cluster-storage.ts
 *
 * PostgreSQL: `RELAY_BENCH_DATABASE_URL=postgres://…` (an empty database), else a temporary server
 * started from the Debian binaries as the tests do (fsync off: a floor on the round trips, not disks).
 */
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { FakeClock } from '../src/lib/clock.ts'
import { silentLogger } from '../src/lib/logger.ts'
import type { MessageRecord } from '../src/services/models/records.ts'
import type { Storage } from '../src/services/ports.ts'
import { openPostgres } from '../src/storage/postgres/open-postgres.ts'
import { SqliteStorage } from '../src/storage/sqlite/sqlite-storage.ts'
import { tempDir } from '../test/support/harness.ts'
import { findPostgres, startPostgres, type TestPostgres } from '../test/support/postgres.ts'

const MESSAGES = Number(process.env.BENCH_MESSAGES ?? 20_000)
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 32)
const RECIPIENTS = 100
const PAGE = 50
const T0 = Date.parse('2026-11-22T10:00:00.000Z')

const key = (i: number) => `agent${String(i).padStart(38, '0')}`

function message(i: number): MessageRecord {
  return {
    messageId: `msg_${String(i).padStart(12, '0')}`,
    senderKey: key(RECIPIENTS + (i % 10)),
    recipientKey: key(i % RECIPIENTS),
    contentType: 'application/json',
    body: JSON.stringify({ n: i, text: 'x'.repeat(200) }),
    attachments: null,
    threadId: null,
    inReplyTo: null,
    metadata: null,
    status: 'sent',
    createdAt: T0 + i,
    expiresAt: T0 + 86_400_000,
    deliveredAt: null,
  }
}

async function pool(count: number, work: (i: number) => Promise<void>): Promise<number> {
  let next = 0
  const t0 = performance.now()
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < count) await work(next++)
    }),
  )
  return (performance.now() - t0) / 1000
}

async function measure(name: string, storage: Storage): Promise<void> {
  const insertS = await pool(MESSAGES, async (i) => {
    const m = message(i)
    await storage.transaction((tx) => tx.messages.insert(m, []))
  })
  const polls = MESSAGES / PAGE
  const now = T0 + MESSAGES + 1
  const pollS = await pool(polls, async (i) => {
    const page = await storage.messages.listInbox(key(i % RECIPIENTS), { status: 'sent' }, null, PAGE, now, now - 86_400_000)
    if (page.length) await storage.transaction((tx) => tx.messages.markDelivered(page.map((m) => m.messageId), now))
  })
  console.log(
    `${name.padEnd(9)} inserts ${Math.round(MESSAGES / insertS).toLocaleString('en')}/s   polls (page ${PAGE} + mark) ${Math.round(polls / pollS).toLocaleString('en')}/s`,
  )
}

console.log(`${MESSAGES.toLocaleString('en')} messages, concurrency ${CONCURRENCY}`)
const dir = tempDir('relay-bench-')
const sqlite = new SqliteStorage({ path: join(dir, 'relay.db'), lockWaitMs: 5000, logger: silentLogger, now: T0 })
await measure('sqlite', sqlite)
await sqlite.close()
rmSync(dir, { recursive: true, force: true })

let server: TestPostgres | null = null
let url = process.env.RELAY_BENCH_DATABASE_URL
if (!url) {
  const bin = findPostgres()
  if (!bin) {
    console.log('postgres  skipped: no RELAY_BENCH_DATABASE_URL and no /usr/lib/postgresql/*/bin')
    process.exit(0)
  }
  server = await startPostgres(bin)
  url = await server.createDatabase('bench')
}
const pg = await openPostgres(url, { logger: silentLogger, clock: new FakeClock(T0), lockWaitMs: 5000 })
await measure('postgres', pg.storage)
await pg.storage.close()
await server?.remove()
