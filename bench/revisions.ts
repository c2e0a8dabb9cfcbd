/**
 * Two builds of the relay side by side on this machine: signed send and signed GET throughput,
 * alternating runs (A B A B …) so that load from elsewhere falls on both alike. Prints figures,
 * asserts nothing.
 *
 *   bun bench/revisions.ts OLD_BINARY NEW_BINARY
 *   git worktree add /tmp/relay-old <rev> && (cd /tmp/relay-old && npm ci && npm run build)
 *   bun bench/revisions.ts /tmp/relay-old/dist/relay dist/relay
 *
 * Sizes (env): BENCH_ROUNDS 5, BENCH_REQUESTS 20000 per phase, BENCH_AGENTS 1000, BENCH_CONCURRENCY 64.
 * Each run starts a fresh relay on a new data directory (rate limits off), creates the agents, then
 * times pre-signed requests — `POST /v1/messages` (1 KiB JSON body), then `GET /v1/agents/{key}` —
 * in two phases on the same process: "cold", the first requests after start-up, while the runtime is
 * still compiling the hot paths (a larger build has more to compile), and "warm", the same number
 * again right after, which is what a relay that has been up for a while does.
 */
import { rmSync } from 'node:fs'
import { benchSize, fmt, makeAgents, percentile, runLoad, startRelayBinary } from './lib.ts'

const [oldBin, newBin] = process.argv.slice(2)
if (!oldBin || !newBin) throw new Error('usage: bun bench/revisions.ts OLD_BINARY NEW_BINARY')
const ROUNDS = benchSize('BENCH_ROUNDS', 5, 2)
const REQUESTS = benchSize('BENCH_REQUESTS', 20_000, 4_000)
const AGENTS = benchSize('BENCH_AGENTS', 1_000, 200)
const CONCURRENCY = benchSize('BENCH_CONCURRENCY', 64, 64)
const env = { RELAY_RATE_SEND_PER_MIN: '0', RELAY_RATE_POLL_PER_MIN: '0', RELAY_RATE_REQUESTS_PER_MIN: '0' }
const PHASES = ['cold', 'warm'] as const
type Phase = (typeof PHASES)[number]
type Load = Awaited<ReturnType<typeof runLoad>>

async function run(binary: string): Promise<Record<Phase, { send: Load; get: Load }>> {
  const relay = await startRelayBinary(env, undefined, binary)
  try {
    const agents = makeAgents(AGENTS)
    const timestamp = new Date().toISOString()
    const filler = 'x'.repeat(1000)
    // first request of each agent creates it: not timed
    await runLoad(AGENTS, 32, (i) => fetch(`${relay.url}/v1/agents/${agents[i].keys.publicKey}`, { headers: agents[i].sign('GET', `/v1/agents/${agents[i].keys.publicKey}`, new Date(Date.now() - 1000).toISOString()) }))
    const out = {} as Record<Phase, { send: Load; get: Load }>
    for (const [p, phase] of PHASES.entries()) {
      // every request of every phase is signed differently (no replay refusals)
      const sends = Array.from({ length: REQUESTS }, (_, i) => {
        const a = agents[i % AGENTS]
        const body = JSON.stringify({ recipient_key: agents[(i + 1) % AGENTS].keys.publicKey, body: { i: p * REQUESTS + i, filler } })
        return { body, headers: { ...a.sign('POST', '/v1/messages', timestamp, body), 'content-type': 'application/json' } }
      })
      const send = await runLoad(REQUESTS, CONCURRENCY, (i) => fetch(`${relay.url}/v1/messages`, { method: 'POST', ...sends[i] }))
      const gets = Array.from({ length: REQUESTS }, (_, i) => {
        const a = agents[i % AGENTS]
        const path = `/v1/agents/${agents[(i + 7) % AGENTS].keys.publicKey}`
        return { path, headers: a.sign('GET', path, new Date(Date.now() + 1 + p * 1000 + (i % 997)).toISOString()) }
      })
      const get = await runLoad(REQUESTS, CONCURRENCY, (i) => fetch(`${relay.url}${gets[i].path}`, { headers: gets[i].headers }))
      out[phase] = { send, get }
    }
    return out
  } finally {
    relay.proc.kill('SIGTERM')
    await relay.proc.exited
    rmSync(relay.dataDir, { recursive: true, force: true })
  }
}

type Figures = Record<'send' | 'get' | 'sendP99' | 'getP99', number[]>
const empty = (): Figures => ({ send: [], get: [], sendP99: [], getP99: [] })
const results = { old: { cold: empty(), warm: empty() }, new: { cold: empty(), warm: empty() } }
console.log(`revisions: old ${oldBin}\n           new ${newBin}\n${ROUNDS} rounds; each run: ${REQUESTS} sends and ${REQUESTS} GETs cold, then as many warm; ${CONCURRENCY} in flight, ${AGENTS} agents`)
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, bin] of round % 2 === 0 ? ([['old', oldBin], ['new', newBin]] as const) : ([['new', newBin], ['old', oldBin]] as const)) {
    const r = await run(bin)
    const line: string[] = []
    for (const phase of PHASES) {
      const s = results[name][phase]
      const { send, get } = r[phase]
      s.send.push(send.perSecond)
      s.get.push(get.perSecond)
      s.sendP99.push(percentile(send.latencies, 99))
      s.getP99.push(percentile(get.latencies, 99))
      line.push(`${phase}: send ${fmt(send.perSecond, 0)}/s ${JSON.stringify(send.statuses)} GET ${fmt(get.perSecond, 0)}/s ${JSON.stringify(get.statuses)}`)
    }
    console.log(`  round ${round + 1} ${name}: ${line.join('  ')}`)
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
for (const phase of PHASES) {
  console.log(`\nmedian of rounds, ${phase}`)
  for (const kind of ['send', 'get'] as const) {
    const o = median(results.old[phase][kind])
    const n = median(results.new[phase][kind])
    const p99 = kind === 'send' ? 'sendP99' : 'getP99'
    console.log(`  signed ${kind === 'send' ? 'send' : 'GET '}: old ${fmt(o, 0)}/s  new ${fmt(n, 0)}/s  change ${fmt(((n - o) / o) * 100, 1)} %   p99 old ${fmt(median(results.old[phase][p99]))} ms new ${fmt(median(results.new[phase][p99]))} ms`)
  }
}
