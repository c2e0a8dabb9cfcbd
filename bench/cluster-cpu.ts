/**
 * Where a cluster-mode send's CPU goes: the relay process against the PostgreSQL server's processes,
 * per signed send, one instance. Prints figures, asserts nothing; needs Linux
 * (/proc).
 *
 *   bun bench/cluster-cpu.ts            BENCH_SENDS (6,000), BENCH_NO_BUILD=1 to reuse dist/relay
 *
 * The load is bench/cluster.ts's: 200 senders, 50 recipients, 64 in flight; the same on a SQLite relay.
 * BENCH_KNOWN_RECIPIENTS=1: the recipients sign a request first, so they have records (which the relay
 * then serves from its cache) — as the recipients of a live relay do; by default they have none, and
 * every send reads its recipient's row.
 */
import { readdirSync, rmSync } from 'node:fs'
import { benchSize, fmt, makeAgents, procCpu, runLoad, startRelayBinary } from './lib.ts'
import { signedSends, startClusterServices } from './cluster-lib.ts'

const SENDS = benchSize('BENCH_SENDS', 6000, 1500)
const limitsOff = { RELAY_RATE_SEND_PER_MIN: '0', RELAY_RATE_POLL_PER_MIN: '0', RELAY_RATE_REQUESTS_PER_MIN: '0' }

/** CPU ms of the processes whose command name passes `match` (children not included). */
function cpuOf(match: (name: string, pid: number) => boolean): number {
  let ms = 0
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    const p = procCpu(`/proc/${pid}/stat`)
    if (p && match(p.name, Number(pid))) ms += p.ms
  }
  return ms
}

async function measure(label: string, env: Record<string, string>) {
  const relay = await startRelayBinary({ ...limitsOff, ...env })
  try {
    const senders = makeAgents(200)
    const recipients = makeAgents(50)
    if (process.env.BENCH_KNOWN_RECIPIENTS === '1') {
      await runLoad(recipients.length, 16, (i) => {
        const path = `/v1/agents/${recipients[i].keys.publicKey}`
        return fetch(`${relay.url}${path}`, { headers: recipients[i].sign('GET', path, new Date().toISOString()) })
      })
    }
    const warm = signedSends(senders, recipients, senders.length)
    await runLoad(warm.length, 32, (i) => fetch(`${relay.url}/v1/messages`, { method: 'POST', ...warm[i] }))
    const requests = signedSends(senders, recipients, SENDS)
    const who = {
      relay: (_: string, pid: number) => pid === relay.proc.pid,
      postgres: (comm: string) => comm === 'postgres',
    }
    const before = { relay: cpuOf(who.relay), postgres: cpuOf(who.postgres) }
    const r = await runLoad(SENDS, 64, (i) => fetch(`${relay.url}/v1/messages`, { method: 'POST', ...requests[i] }))
    const per = (a: number, b: number) => fmt(((b - a) * 1000) / SENDS, 0)
    console.log(
      `${label}: ${fmt(r.perSecond, 0)} sends/s; CPU per send: relay ${per(before.relay, cpuOf(who.relay))} µs, PostgreSQL server ${per(before.postgres, cpuOf(who.postgres))} µs`,
    )
  } finally {
    relay.proc.kill('SIGTERM')
    await relay.proc.exited
    rmSync(relay.dataDir, { recursive: true, force: true })
  }
}

const { pg, s3 } = await startClusterServices()
try {
  for (let round = 0; round < benchSize('BENCH_ROUNDS', 2, 1); round++) {
    const url = await pg.createDatabase(`bench_cpu_${round}`)
    await measure('PostgreSQL, 1 instance', { RELAY_DATABASE_URL: url, RELAY_BLOB_STORE: s3.url(`cpu${round}/`), ...s3.env })
    await measure('SQLite relay          ', {})
  }
} finally {
  await Promise.all([pg.remove(), s3.stop()])
}
