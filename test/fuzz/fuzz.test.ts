/**
 * Generated hostile input, bounded for `npm test`: ≥ 10,000 validly signed HTTP requests across every
 * endpoint through relay.handle(), and WebSocket frames on real sockets. No 5xx, no dropped
 * connection, every error in the envelope with its request id, bodies read back exactly as sent, and the
 * relay healthy afterwards. The seed is printed; FUZZ_SEED=<seed> replays a run, FUZZ_REQUESTS sets its
 * size (bench/fuzz.ts runs 100,000 and prints counts per status).
 */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { pathWithQuery } from '../../src/lib/url.ts'
import { startTestRelay, type TestRelay } from '../support/harness.ts'
import { fuzzHttp, fuzzWs, type FuzzReport } from './fuzzer.ts'

const SEED = Number(process.env.FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31))
const REQUESTS = Number(process.env.FUZZ_REQUESTS ?? 10_000)
const FRAMES = Number(process.env.FUZZ_FRAMES ?? 2_000)
const OVER_SOCKET = Number(process.env.FUZZ_SOCKET_REQUESTS ?? 1_000)
/** Low limits, so that 429 answers are part of the mix. */
const LIMITS = { rateLimits: { sendPerMin: 8, pollPerMin: 20, requestsPerMin: 100 } }

function summary(report: FuzzReport): string {
  return `statuses ${JSON.stringify(report.statuses)} codes ${JSON.stringify(report.codes)} exact body checks ${report.exactChecks}`
}

let t: TestRelay
let url = ''
beforeAll(async () => {
  console.log(`fuzz seed ${SEED} (replay with FUZZ_SEED=${SEED})`)
  // webhooks go nowhere: every name resolves to a public address and every POST is answered 204
  t = await startTestRelay(LIMITS, { fetch: (async () => new Response(null, { status: 204 })) as unknown as typeof fetch })
  t.relay.features.webhooks.dispatcher.setResolver(async () => [{ address: '93.184.216.34', family: 4 }])
  ;({ url } = await t.relay.start())
})
afterAll(() => t.close())

test(`${REQUESTS} generated HTTP requests: no 5xx, every error in the envelope, bodies exact`, async () => {
  const report = await fuzzHttp({ handle: (r) => t.handle(r), now: () => t.clock.now(), advance: (ms) => t.clock.advance(ms) }, { seed: SEED, total: REQUESTS })
  console.log(summary(report))
  expect(report.failures).toEqual([])
  expect(report.requests).toBeGreaterThanOrEqual(REQUESTS)
  // the run reached the interesting paths, not only the front door
  for (const status of [200, 201, 204, 400, 401, 404, 422, 429]) expect(report.statuses[status] ?? 0).toBeGreaterThan(0)
  expect(report.exactChecks).toBeGreaterThan(20)
}, 180_000)

test(`${OVER_SOCKET} more over a real socket: every connection answered`, async () => {
  const overSocket = (request: Request) => fetch(new Request(url + pathWithQuery(request.url), request))
  const report = await fuzzHttp({ handle: overSocket, now: () => t.clock.now(), advance: (ms) => t.clock.advance(ms) }, { seed: SEED + 1, total: OVER_SOCKET })
  console.log(summary(report))
  expect(report.failures).toEqual([])
}, 120_000)

test(`${FRAMES} generated WebSocket frames: every socket answers and stays, no internal errors`, async () => {
  const report = await fuzzWs(url.replace('http', 'ws') + '/v1/ws', () => t.clock.now(), { seed: SEED, total: FRAMES })
  console.log('frames', report.frames, 'replies', JSON.stringify(report.replies))
  expect(report.failures).toEqual([])
  expect(report.frames).toBeGreaterThanOrEqual(FRAMES * 0.9)
}, 120_000)

test('the relay is healthy afterwards: ready, and an agent can send and poll', async () => {
  expect((await t.handle(new Request('http://relay.test/v1/health/ready'))).status).toBe(200)
  const a = t.client()
  const b = t.client()
  await b.updateProfile({ inbox_policy: 'open' })
  const sent = await a.send({ recipient_key: b.publicKey, body: { after: 'fuzz' } })
  const page = await b.poll()
  expect(page.messages.map((m) => m.message_id)).toContain(sent.message_id)
})
