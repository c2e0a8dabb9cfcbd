/**
 * Where a signed request's CPU goes, by thread: the event loop ("relay"), the signature verifier and
 * WAL checkpointer workers ("Worker"), the JIT compiler, the garbage collector's helpers. Reads
 * /proc/PID/task/*\/stat before and after a timed load, so it needs Linux. Prints figures, asserts nothing.
 *
 *   bun bench/threads.ts [BINARY ...]            (default dist/relay; several binaries run alternately)
 *
 * Sizes (env): BENCH_ROUNDS 2, BENCH_REQUESTS 20000, BENCH_AGENTS 1000, BENCH_CONCURRENCY 64. Each run
 * starts a fresh relay (rate limits off), creates the agents untimed, then times N sends (1 KiB JSON)
 * and N GETs of agent profiles. Also prints write system calls and bytes per request (/proc/PID/io:
 * WAL frames, checkpoints and socket writes together).
 */
import { readdirSync, readFileSync, rmSync } from 'node:fs'
import { BINARY, benchSize, fmt, makeAgents, procCpu, runLoad, startRelayBinary } from './lib.ts'

const binaries = process.argv.slice(2).length ? process.argv.slice(2) : [BINARY]
const ROUNDS = benchSize('BENCH_ROUNDS', 2, 1)
const REQUESTS = benchSize('BENCH_REQUESTS', 20_000, 4_000)
const AGENTS = benchSize('BENCH_AGENTS', 1_000, 200)
const CONCURRENCY = benchSize('BENCH_CONCURRENCY', 64, 64)
const env = { RELAY_RATE_SEND_PER_MIN: '0', RELAY_RATE_POLL_PER_MIN: '0', RELAY_RATE_REQUESTS_PER_MIN: '0' }

/** CPU ms per thread name (threads of one name summed), from utime + stime in clock ticks of 10 ms. */
function threadCpu(pid: number): Map<string, number> {
  const out = new Map<string, number>()
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    const t = procCpu(`/proc/${pid}/task/${tid}/stat`)
    if (t) out.set(t.name, (out.get(t.name) ?? 0) + t.ms)
  }
  return out
}

function io(pid: number): Record<string, number> {
  return Object.fromEntries(readFileSync(`/proc/${pid}/io`, 'utf8').trim().split('\n').map((l) => [l.split(': ')[0], Number(l.split(': ')[1])]))
}

async function measure(pid: number, run: () => Promise<{ perSecond: number }>) {
  const [cpu0, io0] = [threadCpu(pid), io(pid)]
  const { perSecond } = await run()
  const [cpu1, io1] = [threadCpu(pid), io(pid)]
  const perRequest = (a: number, b: number) => ((b - a) * 1000) / REQUESTS
  const threads = [...cpu1].map(([name, ms]) => [name, perRequest(cpu0.get(name) ?? 0, ms)] as const).filter(([, us]) => us >= 0.5)
  const total = threads.reduce((sum, [, us]) => sum + us, 0)
  return { perSecond, threads, total, writes: (io1.syscw - io0.syscw) / REQUESTS, bytes: (io1.wchar - io0.wchar) / REQUESTS }
}

async function run(binary: string) {
  const relay = await startRelayBinary(env, undefined, binary)
  try {
    const agents = makeAgents(AGENTS)
    await runLoad(AGENTS, 32, (i) => fetch(`${relay.url}/v1/agents/${agents[i].keys.publicKey}`, { headers: agents[i].sign('GET', `/v1/agents/${agents[i].keys.publicKey}`, new Date(Date.now() - 1000).toISOString()) }))
    const timestamp = new Date().toISOString()
    const filler = 'x'.repeat(1000)
    const sends = Array.from({ length: REQUESTS }, (_, i) => {
      const body = JSON.stringify({ recipient_key: agents[(i + 1) % AGENTS].keys.publicKey, body: { i, filler } })
      return { body, headers: { ...agents[i % AGENTS].sign('POST', '/v1/messages', timestamp, body), 'content-type': 'application/json' } }
    })
    const gets = Array.from({ length: REQUESTS }, (_, i) => {
      const path = `/v1/agents/${agents[(i + 7) % AGENTS].keys.publicKey}`
      return { path, headers: agents[i % AGENTS].sign('GET', path, new Date(Date.now() + 1 + (i % 997)).toISOString()) }
    })
    const pid = relay.proc.pid
    const send = await measure(pid, () => runLoad(REQUESTS, CONCURRENCY, (i) => fetch(`${relay.url}/v1/messages`, { method: 'POST', ...sends[i] })))
    const get = await measure(pid, () => runLoad(REQUESTS, CONCURRENCY, (i) => fetch(`${relay.url}${gets[i].path}`, { headers: gets[i].headers })))
    return { send, get }
  } finally {
    relay.proc.kill('SIGTERM')
    await relay.proc.exited
    rmSync(relay.dataDir, { recursive: true, force: true })
  }
}

console.log(`threads: ${ROUNDS} round(s) of ${REQUESTS} sends and ${REQUESTS} GETs, ${CONCURRENCY} in flight, ${AGENTS} agents; CPU µs per request by thread`)
for (let round = 0; round < ROUNDS; round++) {
  for (const binary of round % 2 === 0 ? binaries : [...binaries].reverse()) {
    const r = await run(binary)
    for (const [kind, m] of [['send', r.send], ['GET ', r.get]] as const) {
      const threads = m.threads.map(([name, us]) => `${name} ${fmt(us, 1)}`).join(', ')
      console.log(`  ${binary} ${kind}: ${fmt(m.perSecond, 0)}/s, CPU ${fmt(m.total, 1)} µs (${threads}); ${fmt(m.writes, 1)} writes, ${fmt(m.bytes / 1024, 1)} KiB written`)
    }
  }
}
