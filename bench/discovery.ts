/**
 * Discovery figures (docs/protocol.md §3): p50/p99 of GET /v1/discover by one tag, three tags, `q` (two words),
 * `name`, and of GET /v1/capabilities, over a database of public agents with 1–5 capabilities each.
 *
 *   bun bench/discovery.ts            (BENCH_AGENTS=100000 BENCH_ITERATIONS=400 BENCH_SEED=42)
 *
 * BENCH_DATA_DIR=/some/dir keeps the seeded database there and reuses it on the next run.
 *
 * The database is seeded directly with bulk INSERTs into `agents`, in transactions of 5,000, through the
 * real schema and its triggers (FTS, agent_tags, tag_counts), not via HTTP, and not ANALYZEd (a relay
 * never runs ANALYZE itself). Each measured request is a
 * signed Request built beforehand and timed through `relay.handle()` in process (the whole pipeline:
 * signature check, replay cache write, validation, query, JSON), not over a socket. The repository
 * alone (SQL only) is timed too, to separate query cost from pipeline cost.
 */
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { withOverrides } from '../src/config/load.ts'
import { silentLogger } from '../src/lib/logger.ts'
import { createRelay } from '../src/relay.ts'
import type { DiscoveryFilter } from '../src/services/models/records.ts'
import { nativeAgent } from './lib.ts'

const AGENTS = Number(process.env.BENCH_AGENTS ?? 100_000)
const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 400)
let seed = Number(process.env.BENCH_SEED ?? 42)

/** mulberry32: a small deterministic PRNG so that runs are comparable. */
function random(): number {
  seed = (seed + 0x6d2b79f5) | 0
  let t = seed
  t = Math.imul(t ^ (t >>> 15), t | 1)
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}
const int = (n: number) => Math.floor(random() * n)
/** Skewed pick: low indexes are common, high ones rare (roughly Zipf-like). */
const skewed = <T>(list: T[]) => list[Math.floor(list.length * random() ** 2.5)]
const pick = <T>(list: T[]) => list[int(list.length)]

const SYLLABLES = ['ka', 'lo', 'mi', 'ren', 'tas', 'vo', 'dri', 'pel', 'sun', 'gar', 'qui', 'nex', 'bor', 'thal', 'zen', 'fi', 'wu', 'ost']
const WORDS = Array.from({ length: 3000 }, (_, i) => SYLLABLES[i % 18] + SYLLABLES[Math.floor(i / 18) % 18] + (i >= 324 ? SYLLABLES[Math.floor(i / 324) % 18] : ''))
const TAGS = Array.from({ length: 400 }, (_, i) => (i < 40 ? ['nlp', 'translation', 'vision', 'code', 'search', 'math', 'audio', 'finance', 'legal', 'medical'][i % 10] + (i >= 10 ? `-${Math.floor(i / 10)}` : '') : `topic:${WORDS[i * 7]}`))
const VERBS = ['translate', 'summarize', 'classify', 'extract', 'generate', 'detect', 'answer', 'convert', 'rank', 'plan', 'review', 'draft']
const ADJECTIVES = ['swift', 'quiet', 'brave', 'clever', 'amber', 'lucid', 'nimble', 'steady', 'bright', 'calm', 'eager', 'gentle', 'keen', 'merry', 'noble', 'polar', 'rapid', 'silver', 'tidy', 'vivid']
const NOUNS = ['otter', 'falcon', 'badger', 'heron', 'lynx', 'marmot', 'osprey', 'panda', 'quokka', 'raven', 'salmon', 'tapir', 'walrus', 'yak', 'zebra', 'bison', 'camel', 'dingo', 'egret', 'gecko']

const sentence = (n: number) => Array.from({ length: n }, () => skewed(WORDS)).join(' ')

interface Seeded {
  key: string
  name: string
  tags: string[]
  words: string[]
}

const keepDir = process.env.BENCH_DATA_DIR
const dataDir = keepDir ?? mkdtempSync(join(tmpdir(), 'relay-bench-discovery-'))
const relay = createRelay(withOverrides({ dataDir, port: 0, logLevel: 'error', rateLimits: { requestsPerMin: 0 } }), { logger: silentLogger })
const db = relay.sqlite!
const now = Date.now()

// --- seed ---
const samples: Seeded[] = []
const existing = db.query<{ n: number }, []>('SELECT count(*) AS n FROM agents').get()!.n
if (existing > 0) {
  for (const row of db.query<{ public_key: string; display_name: string; capabilities: string }, []>(
    'SELECT public_key, display_name, capabilities FROM agents WHERE rowid % 97 = 0',
  ).all()) {
    const caps = JSON.parse(row.capabilities) as { description: string; tags: string[] }[]
    samples.push({ key: row.public_key, name: row.display_name, tags: [...new Set(caps.flatMap((c) => c.tags))], words: caps.flatMap((c) => c.description.split(' ')) })
  }
  console.log(`reusing ${existing} agents in ${dataDir}`)
} else {
  const t0 = performance.now()
  const insert = db.prepare(
    `INSERT INTO agents (public_key, display_name, status, visibility, capabilities, created_at, updated_at, last_active_at)
     VALUES (?, ?, 'active', 'public', ?, ?, ?, ?)`,
  )
  const BATCH = 5000
  for (let start = 0; start < AGENTS; start += BATCH) {
    db.transaction(() => {
      for (let i = start; i < Math.min(AGENTS, start + BATCH); i++) {
        const key = randomBytes(32).toString('base64url')
        const name = `Agent ${pick(ADJECTIVES)} ${pick(NOUNS)} ${i}`
        const caps = Array.from({ length: 1 + int(5) }, (_, c) => ({
          name: `${pick(VERBS)}-${skewed(WORDS)}-${c}`,
          description: sentence(6 + int(10)),
          tags: [...new Set(Array.from({ length: 1 + int(3) }, () => skewed(TAGS)))],
          version: '1.0.0',
        }))
        const active = now - int(30 * 24 * 3600 * 1000)
        insert.run(key, name, JSON.stringify(caps), active - 1000, active, active)
        if (i % 97 === 0) {
          samples.push({ key, name, tags: [...new Set(caps.flatMap((c) => c.tags))], words: caps.flatMap((c) => c.description.split(' ')) })
        }
      }
    })()
  }
  const counts = db.query<{ n: number }, []>('SELECT count(*) AS n FROM agent_tags').get()!.n
  const tags = db.query<{ n: number }, []>('SELECT count(*) AS n FROM tag_counts').get()!.n
  console.log(
    `seeded ${AGENTS} public agents (${counts} agent-tag rows, ${tags} distinct tags) in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
  )
}

// --- signed requests, built before timing ---
const caller = nativeAgent()
let tsOffset = 0
function signedGet(pathWithQuery: string): Request {
  const timestamp = new Date(Date.now() + tsOffset++).toISOString()
  return new Request(`http://relay.bench${pathWithQuery}`, { headers: caller.sign('GET', pathWithQuery, timestamp) })
}

const qs = (params: [string, string][]) => '?' + new URLSearchParams(params).toString()
/** Query generators: each draws its inputs from the seeded data, so most searches find agents. */
const shapes: Record<string, () => [string, string][]> = {
  'discover tag (1)': () => [['tag', skewed(TAGS)]],
  'discover tags (3, AND)': () => {
    const s = samples.filter((x) => x.tags.length >= 3)
    const tags = pick(s).tags.slice().sort(() => random() - 0.5).slice(0, 3)
    return tags.map((t) => ['tag', t])
  },
  'discover q (2 words)': () => {
    const s = pick(samples)
    return [['q', `${pick(s.words)} ${pick(s.words).slice(0, 4)}`]]
  },
  'discover name': () => [['name', `${pick(ADJECTIVES)} ${pick(NOUNS)}`]],
  'capabilities (catalog)': () => [],
  'capabilities prefix': () => [['prefix', pick(['nlp', 'topic:k', 'v', 'code-1'])]],
}

function stats(xs: number[]) {
  xs.sort((a, b) => a - b)
  const p = (q: number) => xs[Math.min(xs.length - 1, Math.floor(q * xs.length))]
  return { p50: p(0.5), p99: p(0.99), max: xs[xs.length - 1] }
}
const f = (n: number) => n.toFixed(2).padStart(7)

console.log(`\n${ITERATIONS} requests per shape through relay.handle() in process (ms):`)
console.log(`${'shape'.padEnd(26)} ${'p50'.padStart(7)} ${'p99'.padStart(7)} ${'max'.padStart(7)}   avg hits`)
for (const [label, make] of Object.entries(shapes)) {
  const path = label.startsWith('capabilities') ? '/v1/capabilities' : '/v1/discover'
  const requests = Array.from({ length: ITERATIONS }, () => signedGet(path + qs(make())))
  for (let i = 0; i < 20; i++) await (await relay.handle(signedGet(path + qs(make())))).arrayBuffer() // warm-up
  const times: number[] = []
  let hits = 0
  for (const req of requests) {
    const t0 = performance.now()
    const res = await relay.handle(req)
    const body = (await res.json()) as { agents?: unknown[]; capabilities?: unknown[] }
    times.push(performance.now() - t0)
    if (res.status !== 200) throw new Error(`${label}: ${res.status} ${JSON.stringify(body)}`)
    hits += (body.agents ?? body.capabilities ?? []).length
  }
  const s = stats(times)
  console.log(`${label.padEnd(26)} ${f(s.p50)} ${f(s.p99)} ${f(s.max)}   ${(hits / ITERATIONS).toFixed(1)}`)
}

// the SQL alone, through the repository
console.log(`\nrepository only (SQL, ${ITERATIONS} runs per shape, ms):`)
const repo = relay.storage.discovery
const base: DiscoveryFilter = { tags: [], words: [], nameContains: null, activeSince: null, after: null, limit: 21 }
const service = relay.features.discovery.discovery
for (const [label, make] of Object.entries(shapes)) {
  const times: number[] = []
  for (let i = 0; i < ITERATIONS; i++) {
    const params = make()
    const raw: Record<string, string | string[]> = {}
    for (const [k, v] of params) raw[k] = k === 'tag' ? [...((raw[k] as string[]) ?? []), v] : v
    const t0 = performance.now()
    if (label.startsWith('capabilities')) await repo.catalog({ prefix: (raw.prefix as string) ?? '', limit: 1000 })
    else {
      const filter = service.parseDiscover(raw)
      if (filter !== 'empty') await repo.search({ ...base, ...filter, limit: 21 })
    }
    times.push(performance.now() - t0)
  }
  const s = stats(times)
  console.log(`${label.padEnd(26)} ${f(s.p50)} ${f(s.p99)} ${f(s.max)}`)
}

await relay.stop()
if (!keepDir) rmSync(dataDir, { recursive: true, force: true })
