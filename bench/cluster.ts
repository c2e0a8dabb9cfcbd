/**
 * Cluster benchmark: prints figures, asserts nothing.
 *
 *   bun bench/cluster.ts                      # full size
 *   BENCH_QUICK=1 bun bench/cluster.ts        # small sizes
 *   BENCH_NO_BUILD=1 …                        # reuse dist/relay
 *   BENCH_ONLY=latency …                      # one part: throughput | latency
 *
 * Starts a PostgreSQL server (Debian's postgresql, as in the tests) and an S3-compatible server (s3rver),
 * then the compiled relay as 1, 2 and 3 instances on that one database and bucket, each with its own
 * data directory and port, as machines behind a load balancer would run. This process is the client
 * and spreads its requests round-robin over the instances. On a 2-core machine every instance, the
 * database and the client share the same two cores: the figures show what the shared database costs
 * and that nothing serialises across instances, not what N machines would do.
 *
 * 1. Send throughput: BENCH_SENDS (6,000) pre-signed POST /v1/messages from 200 agents, 64 in flight;
 *    then the same load on one relay on its embedded SQLite database, for comparison.
 * 2. Cross-instance send → push latency: 100 recipients hold a WebSocket on instance B; signed sends go
 *    to instance A at BENCH_RATE per second (1,000) for BENCH_SECONDS (10). Latency is from just before the
 *    POST to the push frame on B (commit on A, NOTIFY, read on B, push); a first second of sends at the
 *    same rate warms the connections and is not measured.
 */
import { rmSync } from 'node:fs'
import { BINARY, benchSize, fmt, makeAgents, openAgentSocket, percentile, runLoad, startRelayBinary } from './lib.ts'
import { signedSends, startClusterServices } from './cluster-lib.ts'

const SENDS = benchSize('BENCH_SENDS', 6000, 1500)
const RATE = benchSize('BENCH_RATE', 1000, 500)
const SECONDS = benchSize('BENCH_SECONDS', 10, 3)
/** One part only: throughput | latency. */
const ONLY = process.env.BENCH_ONLY

const { pg, s3 } = await startClusterServices()

async function cluster(n: number, database: string) {
  const url = await pg.createDatabase(database)
  const env = { RELAY_DATABASE_URL: url, RELAY_BLOB_STORE: s3.url(`${database}/`), ...s3.env, RELAY_RATE_SEND_PER_MIN: '0', RELAY_RATE_POLL_PER_MIN: '0', RELAY_RATE_REQUESTS_PER_MIN: '0' }
  const instances: Awaited<ReturnType<typeof startRelayBinary>>[] = []
  const stop = async () => {
    for (const r of instances) {
      r.proc.kill('SIGTERM')
      await r.proc.exited
      rmSync(r.dataDir, { recursive: true, force: true })
    }
  }
  try {
    // the first start migrates the database; the others start together
    instances.push(await startRelayBinary(env))
    const rest = await Promise.allSettled(Array.from({ length: n - 1 }, () => startRelayBinary(env)))
    for (const r of rest) if (r.status === 'fulfilled') instances.push(r.value)
    const failed = rest.find((r) => r.status === 'rejected')
    if (failed) throw (failed as PromiseRejectedResult).reason
  } catch (err) {
    await stop()
    throw err
  }
  return { instances, stop }
}


async function throughput(n: number) {
  const c = await cluster(n, `bench_send_${n}`)
  try {
    const senders = makeAgents(200)
    const recipients = makeAgents(50)
    // the agents exist before the clock starts
    const warm = signedSends(senders, recipients, senders.length)
    await runLoad(warm.length, 32, (i) => fetch(`${c.instances[i % n].url}/v1/messages`, { method: 'POST', ...warm[i] }))
    const requests = signedSends(senders, recipients, SENDS)
    const r = await runLoad(SENDS, 64, (i) => fetch(`${c.instances[i % n].url}/v1/messages`, { method: 'POST', ...requests[i] }))
    console.log(`   ${n} instance${n > 1 ? 's' : ' '}: ${fmt(r.perSecond, 0)} sends/s   p50 ${fmt(percentile(r.latencies, 50))} ms  p99 ${fmt(percentile(r.latencies, 99))} ms   ${JSON.stringify(r.statuses)}`)
  } finally {
    await c.stop()
  }
}

/** The same load on one relay on its embedded SQLite database: the figure a PostgreSQL instance is held against. */
async function throughputSqlite() {
  const relay = await startRelayBinary({ RELAY_RATE_SEND_PER_MIN: '0', RELAY_RATE_POLL_PER_MIN: '0', RELAY_RATE_REQUESTS_PER_MIN: '0' })
  try {
    const senders = makeAgents(200)
    const recipients = makeAgents(50)
    const warm = signedSends(senders, recipients, senders.length)
    await runLoad(warm.length, 32, (i) => fetch(`${relay.url}/v1/messages`, { method: 'POST', ...warm[i] }))
    const requests = signedSends(senders, recipients, SENDS)
    const r = await runLoad(SENDS, 64, (i) => fetch(`${relay.url}/v1/messages`, { method: 'POST', ...requests[i] }))
    console.log(`   SQLite relay: ${fmt(r.perSecond, 0)} sends/s   p50 ${fmt(percentile(r.latencies, 50))} ms  p99 ${fmt(percentile(r.latencies, 99))} ms   ${JSON.stringify(r.statuses)}`)
  } finally {
    relay.proc.kill('SIGTERM')
    await relay.proc.exited
    rmSync(relay.dataDir, { recursive: true, force: true })
  }
}

async function crossInstanceLatency() {
  const c = await cluster(2, 'bench_latency')
  const [A, B] = c.instances
  try {
    const recipients = makeAgents(100)
    const senders = makeAgents(10)
    const total = RATE * SECONDS
    // the first second warms connections (client → relay, relay → database) and is not measured
    const warm = RATE
    const all = warm + total
    const issuedAt = new Float64Array(RATE * (SECONDS + 1))
    const latency: number[] = []
    const sockets = await Promise.all(
      recipients.map((k) =>
        openAgentSocket(B.url.replace('http', 'ws') + '/v1/ws', k, (data) => {
          const at = performance.now()
          const m = /"seq":(\d+)/.exec(data)
          if (m && Number(m[1]) >= warm) latency.push(at - issuedAt[Number(m[1])])
        }),
      ),
    )
    const requests = signedSends(senders, recipients, all)
    const inFlight: Promise<unknown>[] = []
    const statuses = new Map<number, number>()
    const postLatency: number[] = []
    const t0 = performance.now()
    let next = 0
    while (next < all) {
      const due = Math.min(all, Math.floor(((performance.now() - t0) * RATE) / 1000) + 1)
      for (; next < due; next++) {
        const i = next
        issuedAt[i] = performance.now()
        inFlight.push(
          fetch(`${A.url}/v1/messages`, { method: 'POST', ...requests[i] }).then(async (res) => {
            await res.arrayBuffer()
            if (i >= warm) postLatency.push(performance.now() - issuedAt[i])
            statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1)
          }),
        )
      }
      await Bun.sleep(1)
    }
    await Promise.all(inFlight)
    const achieved = all / ((performance.now() - t0) / 1000)
    for (let i = 0; i < 1000 && latency.length < total; i++) await Bun.sleep(10)
    for (const ws of sockets) ws.close()
    latency.sort((a, b) => a - b)
    console.log(`\n2. cross-instance send → push: ${total} sends to A at ${RATE}/s (achieved ${fmt(achieved, 0)}/s), pushed on B to ${recipients.length} sockets`)
    console.log(`   statuses ${JSON.stringify(Object.fromEntries(statuses))}; pushes received ${latency.length}/${total}`)
    postLatency.sort((a, b) => a - b)
    console.log(`   push p50 ${fmt(percentile(latency, 50))} ms  p99 ${fmt(percentile(latency, 99))} ms  max ${fmt(latency.at(-1) ?? NaN)} ms   (goal p99 ≤ 50 ms)`)
    console.log(`   POST p50 ${fmt(percentile(postLatency, 50))} ms  p99 ${fmt(percentile(postLatency, 99))} ms (the 201 on A, for comparison)`)
  } finally {
    await c.stop()
  }
}

try {
  console.log(`cluster benchmark: ${BINARY} on PostgreSQL (${pg.url.replace(/:[^:@/]*@/, '@')}) and s3rver`)
  if (ONLY !== 'latency') {
    console.log(`\n1. send throughput, ${SENDS} signed sends, 64 in flight, round-robin over the instances`)
    for (const n of [1, 2, 3]) await throughput(n)
    await throughputSqlite()
  }
  if (ONLY !== 'throughput') await crossInstanceLatency()
} finally {
  await Promise.all([pg.remove(), s3.stop()])
}
