/**
 * The long fuzz run: generated, validly signed requests against every endpoint (the generators and
 * checks of test/fuzz/fuzzer.ts) through `relay.handle()` in process, a share of them over a real
 * socket, and generated WebSocket frames; prints counts per status and per error code, the failures
 * (none expected: a 5xx, an answer outside the envelope, a body not read back as sent, a socket that
 * stops answering), and whether the relay is healthy afterwards.
 *
 *   bun bench/fuzz.ts            (BENCH_FUZZ_REQUESTS=100000 BENCH_FUZZ_FRAMES=20000 BENCH_FUZZ_SEED=random)
 *
 * Exits 1 when anything failed, so it can gate a release.
 */
import { pathWithQuery } from '../src/lib/url.ts'
import { startTestRelay } from '../test/support/harness.ts'
import { fuzzHttp, fuzzWs, type FuzzReport } from '../test/fuzz/fuzzer.ts'
import { benchSize, fmt } from './lib.ts'

const REQUESTS = benchSize('BENCH_FUZZ_REQUESTS', 100_000, 10_000)
const FRAMES = benchSize('BENCH_FUZZ_FRAMES', 20_000, 2_000)
const SEED = Number(process.env.BENCH_FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31))
/** Share of the requests sent over a real socket (the rest in process). */
const SOCKET_SHARE = 0.1

console.log(`fuzz seed ${SEED} (replay with BENCH_FUZZ_SEED=${SEED}); ${REQUESTS} requests, ${FRAMES} WebSocket frames`)
const t = await startTestRelay(
  { rateLimits: { sendPerMin: 8, pollPerMin: 20, requestsPerMin: 100 } },
  { fetch: (async () => new Response(null, { status: 204 })) as unknown as typeof fetch },
)
t.relay.features.webhooks.dispatcher.setResolver(async () => [{ address: '93.184.216.34', family: 4 }])
const { url } = await t.relay.start()
const clock = { now: () => t.clock.now(), advance: (ms: number) => t.clock.advance(ms) }

const merged: FuzzReport = { seed: SEED, requests: 0, statuses: {}, codes: {}, exactChecks: 0, failures: [] }
const add = (r: FuzzReport) => {
  merged.requests += r.requests
  merged.exactChecks += r.exactChecks
  merged.failures.push(...r.failures)
  for (const [k, v] of Object.entries(r.statuses)) merged.statuses[Number(k)] = (merged.statuses[Number(k)] ?? 0) + v
  for (const [k, v] of Object.entries(r.codes)) merged.codes[k] = (merged.codes[k] ?? 0) + v
}

const t0 = performance.now()
const inProcess = Math.round(REQUESTS * (1 - SOCKET_SHARE))
let shown = 0
add(
  await fuzzHttp({ handle: (r) => t.handle(r), ...clock }, {
    seed: SEED,
    total: inProcess,
    onProgress: (done) => {
      if (done - shown >= 20_000) console.log(`  ${(shown = done)} requests…`)
    },
  }),
)
const inProcessS = (performance.now() - t0) / 1000
const t1 = performance.now()
add(await fuzzHttp({ handle: (r) => fetch(new Request(url + pathWithQuery(r.url), r)), ...clock }, { seed: SEED + 1, total: REQUESTS - inProcess }))
const socketS = (performance.now() - t1) / 1000
const ws = await fuzzWs(url.replace('http', 'ws') + '/v1/ws', clock.now, { seed: SEED, total: FRAMES, sockets: 12 })

const ready = (await t.handle(new Request('http://relay.test/v1/health/ready'))).status
const rss = process.memoryUsage().rss / 2 ** 20

console.log(`\nHTTP: ${merged.requests} requests (${inProcess} in process in ${fmt(inProcessS, 1)} s, ${REQUESTS - inProcess} over a socket in ${fmt(socketS, 1)} s)`)
console.log('  per status:', Object.entries(merged.statuses).map(([s, n]) => `${s}: ${n}`).join(', '))
console.log('  per error code:', Object.entries(merged.codes).sort((a, b) => b[1] - a[1]).map(([c, n]) => `${c}: ${n}`).join(', '))
console.log(`  message bodies read back and compared with the text sent: ${merged.exactChecks}`)
console.log(`WebSocket: ${ws.frames} frames; replies: ${Object.entries(ws.replies).map(([k, n]) => `${k}: ${n}`).join(', ')}`)
console.log(`after the run: /v1/health/ready ${ready}, RSS ${fmt(rss, 0)} MiB (relay and fuzzer in one process)`)
const failures = [...merged.failures.map((f) => `${f.status} ${f.problem}: ${f.what} → ${f.answer}`), ...ws.failures]
console.log(failures.length ? `\n${failures.length} FAILURES:\n${failures.slice(0, 50).join('\n')}` : '\nno failures')
await t.close()
process.exit(failures.length || ready !== 200 ? 1 : 0)
