/**
 * Real-time delivery benchmark (docs/protocol.md §8, §9): prints figures, asserts nothing.
 *
 *   bun bench/realtime.ts                          # full size (about a minute)
 *   BENCH_QUICK=1 bun bench/realtime.ts            # small sizes, a few seconds
 *   BENCH_ONLY=latency bun bench/realtime.ts       # one part: latency | sockets | webhooks
 *   BENCH_NO_BUILD=1 …                             # reuse dist/relay instead of building it
 * (from the repository root, with node_modules/.bin on PATH)
 *
 * Every part runs the compiled relay (dist/relay) with rate limits off; this process is the client.
 *
 * 1. Send → push latency: BENCH_AGENTS recipients (100) hold an authenticated WebSocket each; signed
 *    POST /v1/messages (built and signed before the clock starts) are issued at BENCH_RATE per second
 *    (1,000) for BENCH_SECONDS (10) from 10 senders, round-robin over the recipients. Latency is from
 *    just before the POST is issued to the arrival of the pushed frame at the recipient's socket.
 *    Goals: p50 ≤ 1 ms, p99 ≤ 5 ms. The same load runs BENCH_WARMUP_SECONDS (3) first, printed apart:
 *    a fresh relay's first second runs code the JIT has not compiled yet.
 * 2. Memory: BENCH_SOCKETS (10,000) idle WebSockets, each authenticated as its own agent; the relay's
 *    RSS before and after. Goal: ≤ 250 MiB. Needs two file descriptors per socket across the two
 *    processes: the soft limit is printed, and raised for the relay process when the hard limit allows.
 * 3. Webhook throughput: BENCH_HOOKS agents (100) register a webhook on one local receiver that holds
 *    every request until BENCH_DELIVERIES messages (20,000) are queued; then it answers 204 at once and
 *    the rate of deliveries is measured until all are answered. Goal: ≥ 2,000 per second.
 */
import { spawn, spawnSync } from 'bun'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { BINARY, QUICK, benchSize, ensureBinary, fmt, freePort, makeAgents, openAgentSocket, percentile, rssMiB, runLoad } from './lib.ts'

const only = process.env.BENCH_ONLY
const AGENTS = benchSize('BENCH_AGENTS', 100, 100)
const RATE = benchSize('BENCH_RATE', 1000, 1000)
const SECONDS = benchSize('BENCH_SECONDS', 10, 2)
/** Seconds of the same load before the measured run (a fresh process's code is still being compiled). */
const WARMUP_SECONDS = benchSize('BENCH_WARMUP_SECONDS', 3, 1)
const SOCKETS = benchSize('BENCH_SOCKETS', 10_000, 1_000)
const HOOKS = benchSize('BENCH_HOOKS', 100, 20)
const DELIVERIES = benchSize('BENCH_DELIVERIES', 20_000, 2_000)

/** Starts dist/relay on a temp data directory through `sh` so that its descriptor limit can be raised. */
async function startRelay(env: Record<string, string>) {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-bench-rt-'))
  const port = await freePort()
  const cmd = `ulimit -n "$(ulimit -Hn)" 2>/dev/null; exec "${BINARY}" serve --port ${port} --data-dir "${dataDir}"`
  const proc = spawn(['sh', '-c', cmd], {
    env: { PATH: process.env.PATH ?? '', RELAY_LOG_LEVEL: 'warn', RELAY_RATE_SEND_PER_MIN: '0', RELAY_RATE_POLL_PER_MIN: '0', ...env },
    stdout: 'ignore',
    stderr: 'inherit',
  })
  const url = `http://127.0.0.1:${port}`
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`${url}/v1/health/ready`)).status === 200) break
    } catch {}
    if (i > 3000) throw new Error('relay not ready')
    await Bun.sleep(5)
  }
  return {
    proc,
    url,
    ws: `ws://127.0.0.1:${port}/v1/ws`,
    async stop() {
      proc.kill('SIGTERM')
      await proc.exited
      rmSync(dataDir, { recursive: true, force: true })
    },
  }
}

async function latency() {
  const relay = await startRelay({})
  try {
    const recipients = makeAgents(AGENTS)
    const senders = makeAgents(10)
    const warm = RATE * WARMUP_SECONDS
    const total = RATE * SECONDS
    // sequence numbers 0 … warm-1 are the warm-up, warm … warm+total-1 the measured run
    const issuedAt = new Float64Array(warm + total)
    const pushLatency: number[] = []
    const warmPushLatency: number[] = []
    const sockets = await Promise.all(
      recipients.map((k) =>
        openAgentSocket(relay.ws, k, (data) => {
          const at = performance.now()
          const m = /"seq":(\d+)/.exec(data)
          if (!m) return
          const seq = Number(m[1])
          ;(seq < warm ? warmPushLatency : pushLatency).push(at - issuedAt[seq])
        }),
      ),
    )
    // every request signed before the clock starts; one timestamp is fine, each body differs
    const timestamp = new Date().toISOString()
    const requests = Array.from({ length: warm + total }, (_, i) => {
      const body = JSON.stringify({ recipient_key: recipients[i % AGENTS].keys.publicKey, body: { seq: i } })
      const s = senders[i % senders.length]
      return { body, headers: { ...s.sign('POST', '/v1/messages', timestamp, body), 'content-type': 'application/json' } }
    })
    // warm the connection pool
    await Promise.all(Array.from({ length: 20 }, () => fetch(`${relay.url}/v1/health`).then((r) => r.arrayBuffer())))

    /** Issues requests[from … from+count-1] at RATE per second; the 201s' latencies and statuses. */
    async function paced(from: number, count: number) {
      const postLatency: number[] = []
      const statuses = new Map<number, number>()
      const inFlight: Promise<void>[] = []
      const t0 = performance.now()
      let next = 0
      while (next < count) {
        const due = Math.min(count, Math.floor(((performance.now() - t0) * RATE) / 1000) + 1)
        for (; next < due; next++) {
          const i = from + next
          const r = requests[i]
          issuedAt[i] = performance.now()
          inFlight.push(
            fetch(`${relay.url}/v1/messages`, { method: 'POST', headers: r.headers, body: r.body }).then(async (res) => {
              await res.arrayBuffer()
              postLatency.push(performance.now() - issuedAt[i])
              statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1)
            }),
          )
        }
        await Bun.sleep(1)
      }
      await Promise.all(inFlight)
      return { postLatency: postLatency.sort((a, b) => a - b), statuses, seconds: (performance.now() - t0) / 1000 }
    }

    // the first seconds of a fresh process run cold code (the JIT compiles it meanwhile): measured apart
    const warmRun = await paced(0, warm)
    const run = await paced(warm, total)
    for (let i = 0; i < 500 && pushLatency.length < total; i++) await Bun.sleep(10)
    for (const ws of sockets) ws.close()
    pushLatency.sort((a, b) => a - b)
    warmPushLatency.sort((a, b) => a - b)
    console.log(`\n1. send → push latency: ${total} messages at ${RATE}/s (achieved ${fmt(total / run.seconds, 0)}/s) over ${AGENTS} connected agents, after ${warm} sent to warm up`)
    console.log(`   statuses ${JSON.stringify(Object.fromEntries(run.statuses))}; pushes received ${pushLatency.length}/${total}`)
    console.log(`   push  p50 ${fmt(percentile(pushLatency, 50))} ms  p99 ${fmt(percentile(pushLatency, 99))} ms  max ${fmt(pushLatency.at(-1) ?? NaN)} ms   (goal p50 ≤ 1, p99 ≤ 5)`)
    console.log(`   POST  p50 ${fmt(percentile(run.postLatency, 50))} ms  p99 ${fmt(percentile(run.postLatency, 99))} ms (the 201, for comparison)`)
    if (warm > 0) {
      console.log(
        `   the warm-up (${WARMUP_SECONDS} s, a fresh relay): push p50 ${fmt(percentile(warmPushLatency, 50))} ms  p99 ${fmt(percentile(warmPushLatency, 99))} ms  max ${fmt(warmPushLatency.at(-1) ?? NaN)} ms; POST p99 ${fmt(percentile(warmRun.postLatency, 99))} ms`,
      )
    }
  } finally {
    await relay.stop()
  }
}

async function sockets() {
  const soft = spawnSync(['sh', '-c', 'ulimit -n']).stdout.toString().trim()
  const hard = spawnSync(['sh', '-c', 'ulimit -Hn']).stdout.toString().trim()
  const relay = await startRelay({})
  try {
    await Bun.sleep(200)
    const before = rssMiB(relay.proc.pid)
    const keys = makeAgents(SOCKETS)
    const open: WebSocket[] = []
    const t0 = performance.now()
    let failed = 0
    for (let i = 0; i < SOCKETS; i += 200) {
      const batch = await Promise.allSettled(keys.slice(i, i + 200).map((k) => openAgentSocket(relay.ws, k)))
      for (const r of batch) r.status === 'fulfilled' ? open.push(r.value) : failed++
    }
    const openSeconds = (performance.now() - t0) / 1000
    await Bun.sleep(1000)
    const after = rssMiB(relay.proc.pid)
    const details = (await (await fetch(`${relay.url}/v1/health/details`)).json()) as any
    console.log(`\n2. memory with idle authenticated sockets (file descriptors: soft ${soft}, hard ${hard}; the relay runs at the hard limit)`)
    console.log(`   ${open.length} sockets open and authenticated in ${fmt(openSeconds, 1)} s (${failed} failed); relay reports ${details.components.websocket.authenticated}`)
    console.log(`   relay RSS ${fmt(before, 1)} MiB before, ${fmt(after, 1)} MiB after: ${fmt(((after - before) * 1024) / Math.max(1, open.length), 1)} KiB per socket   (goal ≤ 250 MiB at 10,000)`)
    for (const ws of open) ws.close()
  } finally {
    await relay.stop()
  }
}

async function webhooks() {
  let opened = false
  let release: () => void = () => {}
  const gate = new Promise<void>((r) => (release = r))
  let answered = 0
  let lastAt = 0
  let received = 0
  const receiver = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch(req) {
      await req.arrayBuffer()
      received++
      if (!opened) await gate
      answered++
      lastAt = performance.now()
      return new Response(null, { status: 204 })
    },
  })
  const relay = await startRelay({ RELAY_WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', RELAY_WEBHOOK_TIMEOUT: '120s' })
  try {
    const hooks = makeAgents(HOOKS)
    const secret = randomBytes(32).toString('base64url')
    const timestamp = new Date().toISOString()
    await runLoad(HOOKS, 16, (i) => {
      const path = `/v1/agents/${hooks[i].keys.publicKey}/webhook`
      const body = JSON.stringify({ url: `http://127.0.0.1:${receiver.port}/hook`, secret })
      return fetch(relay.url + path, { method: 'PUT', body, headers: { ...hooks[i].sign('PUT', path, timestamp, body), 'content-type': 'application/json' } })
    })
    const senders = makeAgents(10)
    const bodies = Array.from({ length: DELIVERIES }, (_, i) => JSON.stringify({ recipient_key: hooks[i % HOOKS].keys.publicKey, body: { seq: i, pad: 'x'.repeat(200) } }))
    const signed = bodies.map((body, i) => ({ body, headers: { ...senders[i % 10].sign('POST', '/v1/messages', timestamp, body), 'content-type': 'application/json' } }))
    const sent = await runLoad(DELIVERIES, 64, (i) => fetch(`${relay.url}/v1/messages`, { method: 'POST', ...signed[i] }))
    const t0 = performance.now()
    opened = true
    release()
    for (let i = 0; answered < DELIVERIES && i < 60_000; i++) await Bun.sleep(5)
    const seconds = (lastAt - t0) / 1000
    console.log(`\n3. webhook deliveries: ${DELIVERIES} messages to ${HOOKS} webhooks on one local receiver (queued at ${fmt(sent.perSecond, 0)} sends/s, statuses ${JSON.stringify(sent.statuses)})`)
    console.log(`   ${answered} answered (${received} requests) in ${fmt(seconds, 2)} s after the receiver opened: ${fmt(answered / seconds, 0)} deliveries/s   (goal ≥ 2,000)`)
  } finally {
    await relay.stop()
    receiver.stop(true)
  }
}

ensureBinary()
console.log(`realtime bench${QUICK ? ' (QUICK)' : ''}: bun ${Bun.version}, dist/relay`)
if (!only || only === 'latency') await latency()
if (!only || only === 'sockets') await sockets()
if (!only || only === 'webhooks') await webhooks()
