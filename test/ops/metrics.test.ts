/** GET /metrics: the text format parses, counts a known sequence of requests, and is exposed only when asked. */
import { afterAll, describe, expect, test } from 'bun:test'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { MetricsRegistry } from '../../src/metrics/registry.ts'
import { escapeHelp, escapeLabelValue } from '../../src/metrics/exposition.ts'
import { BASE_URL, expectError, startTestRelay, type TestRelay } from '../support/harness.ts'
import { parsePrometheus, sampleValue } from '../support/prometheus.ts'

const opened: TestRelay[] = []
afterAll(async () => {
  for (const t of opened) await t.close()
})
async function relay(metrics: { enabled?: boolean; addr?: { host: string; port: number } | null }) {
  const t = await startTestRelay({ metrics: { enabled: false, addr: null, ...metrics } })
  opened.push(t)
  return t
}
const get = (t: TestRelay, path: string) => t.handle(new Request(BASE_URL + path))
/** Access logging and metrics run after the response is handed over. */
const settle = () => Bun.sleep(5)

describe('registry and text format', () => {
  test('counters, gauges and histograms render and parse; values round-trip through escaping', () => {
    const r = new MetricsRegistry()
    const c = r.counter({ name: 'demo_things_total', help: 'Things.\nWith a \\ backslash', labelNames: ['kind'] })
    c.inc({ kind: 'a "quoted"\nvalue\\' })
    c.inc({ kind: 'b' }, 2.5)
    r.gauge({ name: 'demo_level', help: 'Level.' }).set(-3)
    r.gauge({ name: 'demo_special', help: 'Special values.', labelNames: ['v'], collect: () => [
      { labels: { v: 'inf' }, value: Infinity },
      { labels: { v: 'nan' }, value: NaN },
    ] })
    const h = r.histogram({ name: 'demo_seconds', help: 'Durations.', labelNames: ['op'], buckets: [0.1, 1] })
    for (const v of [0.05, 0.1, 0.5, 3]) h.observe(v, { op: 'x' })
    const fams = parsePrometheus(r.expose())
    expect(fams.get('demo_things_total')?.help).toBe('Things.\nWith a \\ backslash')
    expect(fams.get('demo_things_total')?.type).toBe('counter')
    expect(sampleValue(fams, 'demo_things_total', { kind: 'a "quoted"\nvalue\\' })).toBe(1)
    expect(sampleValue(fams, 'demo_things_total', { kind: 'b' })).toBe(2.5)
    expect(sampleValue(fams, 'demo_level')).toBe(-3)
    expect(sampleValue(fams, 'demo_special', { v: 'inf' })).toBe(Infinity)
    expect(sampleValue(fams, 'demo_special', { v: 'nan' })).toBeNaN()
    expect(sampleValue(fams, 'demo_seconds_bucket', { op: 'x', le: '0.1' })).toBe(2)
    expect(sampleValue(fams, 'demo_seconds_bucket', { op: 'x', le: '1' })).toBe(3)
    expect(sampleValue(fams, 'demo_seconds_bucket', { op: 'x', le: '+Inf' })).toBe(4)
    expect(sampleValue(fams, 'demo_seconds_count', { op: 'x' })).toBe(4)
    expect(sampleValue(fams, 'demo_seconds_sum', { op: 'x' })).toBeCloseTo(3.65)
  })

  test('escaping follows the format exactly', () => {
    expect(escapeHelp('a\\b\nc"d')).toBe('a\\\\b\\nc"d')
    expect(escapeLabelValue('a\\b\nc"d')).toBe('a\\\\b\\nc\\"d')
  })

  test('asking twice for a name returns the same metric; a clash or bad name is refused', () => {
    const r = new MetricsRegistry()
    const a = r.counter({ name: 'x_total', help: 'x', labelNames: ['l'] })
    expect(r.counter({ name: 'x_total', help: 'x', labelNames: ['l'] })).toBe(a)
    expect(() => r.gauge({ name: 'x_total', help: 'x', labelNames: ['l'] })).toThrow(/already registered/)
    expect(() => r.counter({ name: 'x_total', help: 'x' })).toThrow(/already registered/)
    expect(() => r.counter({ name: 'bad-name_total', help: 'x' })).toThrow(/invalid metric name/)
    expect(() => r.counter({ name: 'no_suffix', help: 'x' })).toThrow(/_total/)
    expect(() => r.histogram({ name: 'h', help: 'x', labelNames: ['le'] })).toThrow(/invalid label/)
    expect(() => a.inc({ other: 'x' })).toThrow(/takes labels/)
    expect(() => a.inc({ l: 'x', other: 'y' })).toThrow(/takes labels/)
    expect(() => a.inc({})).toThrow(/takes labels/)
    expect(() => a.inc()).toThrow(/takes labels/)
    expect(() => a.inc({ l: undefined as unknown as string })).toThrow(/takes labels/)
    const none = r.counter({ name: 'y_total', help: 'y' })
    none.inc()
    expect(() => none.inc({ l: 'x' })).toThrow(/takes labels/)
    const two = r.counter({ name: 'z_total', help: 'z', labelNames: ['a', 'b'] })
    two.inc({ b: 2, a: 1 })
    expect(() => two.inc({ a: 1, c: 2 })).toThrow(/takes labels/)
    expect(r.expose()).toContain('z_total{a="1",b="2"} 1')
    expect(() => a.inc({ l: 'x' }, -1)).toThrow(/only increase/)
  })

  test('a collect function that throws leaves that metric out and is reported', () => {
    const errors: string[] = []
    const r = new MetricsRegistry((name) => errors.push(name))
    r.gauge({ name: 'broken', help: 'x', collect: () => { throw new Error('db gone') } })
    r.gauge({ name: 'fine', help: 'x' }).set(1)
    const fams = parsePrometheus(r.expose())
    expect(fams.has('broken')).toBe(false)
    expect(sampleValue(fams, 'fine')).toBe(1)
    expect(errors).toEqual(['broken'])
  })
})

describe('GET /metrics', () => {
  test('counts a known sequence of requests by route, method and status', async () => {
    const t = await relay({ enabled: true })
    const alice = t.client()
    await alice.updateProfile({ display_name: 'Alice', visibility: 'public' }) // PATCH 200
    for (let i = 0; i < 3; i++) await alice.getAgent() // GET 200 ×3
    await alice.getAgent(generateKeyPair().publicKey).catch(() => {}) // GET 404 agent_not_found
    await expectError(await get(t, '/v1/nowhere'), 404, 'not_found')
    await expectError(await get(t, '/v1/nowhere/else'), 404, 'not_found')
    await get(t, '/v1/health')
    await settle()
    const res = await get(t, '/metrics')
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8')
    const fams = parsePrometheus(await res.text())
    const count = (labels: Record<string, string>) => sampleValue(fams, 'relay_http_requests_total', labels)
    expect(count({ method: 'PATCH', route: '/v1/agents/:publicKey', status: '200' })).toBe(1)
    expect(count({ method: 'GET', route: '/v1/agents/:publicKey', status: '200' })).toBe(3)
    expect(count({ method: 'GET', route: '/v1/agents/:publicKey', status: '404' })).toBe(1)
    expect(count({ method: 'GET', route: 'unmatched', status: '404' })).toBe(2)
    expect(count({ method: 'GET', route: '/v1/health', status: '200' })).toBe(1)
    expect(sampleValue(fams, 'relay_http_request_duration_seconds_count', { method: 'GET', route: '/v1/agents/:publicKey', status: '200' })).toBe(3)
    expect(sampleValue(fams, 'relay_http_request_duration_seconds_bucket', { method: 'GET', route: '/v1/agents/:publicKey', status: '200', le: '+Inf' })).toBe(3)
    const total = fams.get('relay_http_requests_total')!.samples.reduce((n, s) => n + s.value, 0)
    expect(total).toBe(8) // the scrape itself is counted after it answers

    // figures read from the database at scrape time
    expect(sampleValue(fams, 'relay_agents', { status: 'active' })).toBe(1)
    expect(sampleValue(fams, 'relay_messages', { status: 'sent' })).toBe(0)
    expect(fams.get('relay_database_size_bytes')!.samples[0].value).toBeGreaterThan(0)
    expect(sampleValue(fams, 'process_resident_memory_bytes')).toBeGreaterThan(0)
    expect(fams.get('relay_build_info')!.samples[0].labels.version).toMatch(/^\d+\.\d+\.\d+/)

    await settle()
    const again = parsePrometheus(await (await get(t, '/metrics')).text())
    expect(sampleValue(again, 'relay_http_requests_total', { method: 'GET', route: '/metrics', status: '200' })).toBe(1)
  })

  test('job runs and durations, accepted messages, and metrics other features register', async () => {
    const t = await relay({ enabled: true })
    await t.relay.scheduler.runNow('prune-replay-cache')
    await t.relay.scheduler.runNow('prune-replay-cache')
    const [a, b] = [t.client(), t.client()]
    await b.getAgent()
    await a.send({ recipient_key: b.publicKey, body: { n: 1 } })
    t.relay.ctx.metrics.gauge({ name: 'relay_test_feature_figure', help: 'A figure a feature reads at scrape time.', collect: () => 4 })
    const fams = parsePrometheus(await (await get(t, '/metrics')).text())
    expect(sampleValue(fams, 'relay_job_runs_total', { job: 'prune-replay-cache', outcome: 'ok' })).toBe(2)
    expect(sampleValue(fams, 'relay_job_duration_seconds_count', { job: 'prune-replay-cache' })).toBe(2)
    expect(sampleValue(fams, 'relay_messages_sent_total')).toBe(1)
    expect(sampleValue(fams, 'relay_test_feature_figure')).toBe(4)
    expect(sampleValue(fams, 'relay_websocket_connections')).toBe(0)
  })

  test('is not served unless enabled', async () => {
    const t = await relay({})
    await expectError(await get(t, '/metrics'), 404, 'not_found')
  })

  test('RELAY_METRICS_ADDR serves it on a listener of its own and not on the main port', async () => {
    const t = await relay({ enabled: true, addr: { host: '127.0.0.1', port: 0 } })
    const { url, metricsUrl } = await t.relay.start()
    expect(metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/)
    expect(metricsUrl).not.toStartWith(url)
    await expectError(await fetch(`${url}/metrics`), 404, 'not_found')
    await fetch(`${url}/v1/health`)
    await settle()
    const res = await fetch(metricsUrl!)
    expect(res.status).toBe(200)
    const fams = parsePrometheus(await res.text())
    expect(sampleValue(fams, 'relay_http_requests_total', { route: '/v1/health', status: '200' })).toBe(1)
    expect((await fetch(metricsUrl!.replace('/metrics', '/other'))).status).toBe(404)
  })
})
