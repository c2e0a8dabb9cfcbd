/**
 * What one send costs the database in cluster mode: prints figures, asserts nothing.
 *
 *   bun bench/cluster-statements.ts           # dist/relay (built unless BENCH_NO_BUILD=1)
 *   RELAY_BINARY=/path/to/relay bun bench/cluster-statements.ts
 *   BENCH_SENDS=2000 …                        # sends per run (default 1,000)
 *
 * Starts a PostgreSQL server with pg_stat_statements, an S3-compatible server and one relay instance,
 * then sends BENCH_SENDS signed messages from 200 agents to 50 recipients twice: one at a time, then 64
 * in flight, each time with the send limits off and on (the default of 30 per minute). Prints the
 * statements PostgreSQL executed per send (pg_stat_statements: BEGIN, COMMIT and NOTIFY count as
 * statements; so does each statement of a multi-statement query) and the transactions per send
 * (pg_stat_database), and which statements those were. Background work of the instance (probes,
 * heartbeats) runs meanwhile and is counted too: a few statements per second.
 */
import { rmSync } from 'node:fs'
import { SQL } from 'bun'
import { BINARY, benchSize, fmt, makeAgents, runLoad, startRelayBinary } from './lib.ts'
import { signedSends, startClusterServices } from './cluster-lib.ts'

const SENDS = benchSize('BENCH_SENDS', 1000, 1000)

const { pg, s3 } = await startClusterServices()

async function withStatements() {
  const admin = new SQL({ url: pg.url, max: 1 })
  await admin.unsafe(`ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'`)
  await admin.close()
  await pg.stop()
  await pg.start()
  const again = new SQL({ url: pg.url, max: 1 })
  await again.unsafe('CREATE EXTENSION IF NOT EXISTS pg_stat_statements')
  await again.close()
}


async function run(limits: boolean, inFlight: number) {
  const name = `stmts_${limits ? 'limits' : 'nolimits'}_${inFlight}`
  const url = await pg.createDatabase(name)
  const rates: Record<string, string> = limits ? {} : { RELAY_RATE_SEND_PER_MIN: '0', RELAY_RATE_POLL_PER_MIN: '0', RELAY_RATE_REQUESTS_PER_MIN: '0' }
  const relay = await startRelayBinary({ RELAY_DATABASE_URL: url, RELAY_BLOB_STORE: s3.url(`${name}/`), ...s3.env, ...rates })
  // the extension's view lives in the postgres database; its figures cover every database
  const db = new SQL({ url: pg.url, max: 1 })
  try {
    const senders = makeAgents(200)
    const recipients = makeAgents(50)
    const warm = signedSends(senders, recipients, senders.length)
    await runLoad(warm.length, 16, (i) => fetch(`${relay.url}/v1/messages`, { method: 'POST', ...warm[i] }))
    const requests = signedSends(senders, recipients, SENDS)
    const dbName = new URL(url).pathname.slice(1)
    const xacts = async () => Number((await db.unsafe(`SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = $1`, [dbName]))[0].n)
    await Bun.sleep(1100)
    await db.unsafe('SELECT pg_stat_statements_reset()')
    const x0 = await xacts()
    const r = await runLoad(SENDS, inFlight, (i) => fetch(`${relay.url}/v1/messages`, { method: 'POST', ...requests[i] }))
    await Bun.sleep(1100) // the last notices, and the statistics the server flushes every second
    const x1 = await xacts()
    const stmts = (await db.unsafe(
      `SELECT calls::int AS calls, regexp_replace(query, '\\s+', ' ', 'g') AS query FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
       WHERE d.datname = $1 AND query NOT LIKE '%pg_stat%' ORDER BY calls DESC`,
      [dbName],
    )) as { calls: number; query: string }[]
    const total = stmts.reduce((n, s) => n + s.calls, 0)
    console.log(`\n${limits ? 'send limit on (30/min)' : 'limits off'}, ${inFlight} in flight: ${fmt(r.perSecond, 0)} sends/s ${JSON.stringify(r.statuses)}`)
    console.log(`   ${fmt(total / SENDS, 2)} statements per send, ${fmt((x1 - x0 - 1) / SENDS, 2)} transactions per send`)
    for (const s of stmts) if (s.calls / SENDS >= 0.01) console.log(`   ${fmt(s.calls / SENDS, 2).padStart(6)}  ${s.query.slice(0, 110)}`)
  } finally {
    await db.close()
    relay.proc.kill('SIGTERM')
    await relay.proc.exited
    rmSync(relay.dataDir, { recursive: true, force: true })
  }
}

try {
  await withStatements()
  console.log(`statements per send: ${BINARY} on PostgreSQL with pg_stat_statements, ${SENDS} signed sends per run`)
  for (const limits of [false, true]) for (const inFlight of [1, 64]) await run(limits, inFlight)
} finally {
  await Promise.all([pg.remove(), s3.stop()])
}
