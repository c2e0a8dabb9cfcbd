/**
 * Foundation figures: signed GET requests/s against the running binary (concurrency 64, many distinct
 * agents), raw Ed25519 verification rates, idle RSS, and start-up time to ready.
 *
 *   bun bench/foundation.ts            (BENCH_REQUESTS=60000 BENCH_AGENTS=2000 BENCH_CONCURRENCY=64)
 */
import { ed25519 } from '@noble/curves/ed25519.js'
import { decodePublicKey, decodeSignature } from '../src/auth/keys.ts'
import { verifyEd25519 } from '../src/auth/verify.ts'
import { ensureBinary, fmt, makeAgents, percentile, rssMiB, runLoad, startRelayBinary } from './lib.ts'

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 60_000)
const AGENTS = Number(process.env.BENCH_AGENTS ?? 2_000)
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 64)

ensureBinary()

// 1. raw verification rate
{
  const [a] = makeAgents(1)
  const text = 'GET\n/v1/agents/x\n2026-11-22T10:00:00.000Z\n47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU'
  const sig = a.sign('GET', '/v1/agents/x', '2026-11-22T10:00:00.000Z')['X-M2M-Signature']
  const pub = decodePublicKey(a.keys.publicKey)!
  const sigBytes = decodeSignature(sig)!
  const msg = new TextEncoder().encode(text)
  let n = 20_000
  let t = performance.now()
  for (let i = 0; i < n; i++) verifyEd25519(pub, text, sigBytes)
  const nativeRate = n / ((performance.now() - t) / 1000)
  n = 2_000
  t = performance.now()
  for (let i = 0; i < n; i++) ed25519.verify(sigBytes, msg, pub)
  const nobleRate = n / ((performance.now() - t) / 1000)
  console.log(`verify: native ${fmt(nativeRate, 0)}/s, @noble/curves ${fmt(nobleRate, 0)}/s (×${fmt(nativeRate / nobleRate, 1)})`)
}

// 2. start-up time to ready (best of 5) and idle RSS
{
  const times: number[] = []
  for (let i = 0; i < 5; i++) {
    const r = await startRelayBinary()
    times.push(r.readyMs)
    r.proc.kill('SIGTERM')
    await r.proc.exited
  }
  times.sort((a, b) => a - b)
  console.log(`start-up to ready: best ${fmt(times[0], 1)} ms, median ${fmt(times[2], 1)} ms (spawn → first 200 from /v1/health/ready)`)
}

const relay = await startRelayBinary({ RELAY_RATE_SEND_PER_MIN: '0', RELAY_RATE_POLL_PER_MIN: '0' })
await Bun.sleep(2000)
console.log(`idle RSS after start: ${fmt(rssMiB(relay.proc.pid), 1)} MiB`)

// 3. signed GET throughput: each request signed in advance (unique timestamps), one agent per slot
const agents = makeAgents(AGENTS)
const base = Date.now()
const pre = Array.from({ length: REQUESTS }, (_, i) => {
  const a = agents[i % AGENTS]
  const path = `/v1/agents/${a.keys.publicKey}`
  const ts = new Date(base + Math.floor(i / AGENTS)).toISOString()
  return { url: relay.url + path, headers: a.sign('GET', path, ts) }
})
// warm up: creates the agents
await runLoad(AGENTS, CONCURRENCY, (i) => fetch(pre[i].url, { headers: pre[i].headers }))
const rest = pre.slice(AGENTS)
const r = await runLoad(rest.length, CONCURRENCY, (i) => fetch(rest[i].url, { headers: rest[i].headers }))
console.log(
  `signed GET /v1/agents/{key}: ${fmt(r.perSecond, 0)} req/s over ${rest.length} requests, ${AGENTS} agents, concurrency ${CONCURRENCY}; ` +
    `p50 ${fmt(percentile(r.latencies, 50))} ms, p99 ${fmt(percentile(r.latencies, 99))} ms; statuses ${JSON.stringify(r.statuses)}`,
)
console.log(`RSS after load: ${fmt(rssMiB(relay.proc.pid), 1)} MiB`)
relay.proc.kill('SIGTERM')
await relay.proc.exited
