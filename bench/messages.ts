/**
 * Messaging benchmark: prints figures, asserts nothing.
 *
 *   bun bench/messages.ts                       # full size (1M messages; several minutes)
 *   BENCH_QUICK=1 bun bench/messages.ts         # small sizes, a few seconds
 *   BENCH_ONLY=poll bun bench/messages.ts       # one part: send | poll | sweep
 * (from the repository root, with node_modules/.bin on PATH)
 *
 * 1. Signed send throughput: a relay process (`bun src/main.ts serve`, rate limits off) and this process
 *    as the client over loopback HTTP; BENCH_SENDERS distinct senders (≥ 1,000), BENCH_CONCURRENCY
 *    requests in flight; every request is built and signed before the clock starts.
 * 2. Poll latency: BENCH_MESSAGES messages across BENCH_AGENTS agents, bulk-inserted straight into the
 *    database (not via HTTP), then BENCH_POLLS signed `GET /v1/messages?limit=100` one at a time, each by a
 *    different agent; p50/p99 as the client sees them. Also the database size that took.
 * 3. Sweep stall: BENCH_SWEEP messages past expiry in an in-process relay; the expiry job runs while a
 *    1 ms interval probe measures event-loop lag and a signed send every 5 ms is timed; the same sends
 *    timed for BENCH_BASELINE_MS (5 s) before the sweep are the baseline its p99 is compared with.
 *
 * Sizes (env): BENCH_SENDERS 1000, BENCH_SENDS 20000, BENCH_CONCURRENCY 64, BENCH_MESSAGES 1000000,
 * BENCH_AGENTS 10000, BENCH_POLLS 2000, BENCH_SWEEP 1000000. BENCH_QUICK=1 divides the big ones.
 */
import { spawn, type Subprocess } from 'bun'
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { keyPairFromSeed, signRequest, type KeyPair } from '../src/auth/sign.ts'
import { withOverrides } from '../src/config/load.ts'
import { systemClock } from '../src/lib/clock.ts'
import { newMessageId } from '../src/lib/ids.ts'
import { silentLogger } from '../src/lib/logger.ts'
import { createRelay } from '../src/relay.ts'
import { openDatabase } from '../src/storage/sqlite/database.ts'
import { QUICK, benchSize, freePort, percentile, runLoad } from './lib.ts'

const SENDERS = benchSize('BENCH_SENDERS', 1000, 1000)
const SENDS = benchSize('BENCH_SENDS', 20_000, 5_000)
const CONCURRENCY = benchSize('BENCH_CONCURRENCY', 64, 64)
const MESSAGES = benchSize('BENCH_MESSAGES', 1_000_000, 50_000)
const AGENTS = benchSize('BENCH_AGENTS', 10_000, 1_000)
const POLLS = benchSize('BENCH_POLLS', 2_000, 300)
const SWEEP = benchSize('BENCH_SWEEP', 1_000_000, 20_000)
/** How long sends are timed before the sweep starts, as the baseline. */
const BASELINE_MS = benchSize('BENCH_BASELINE_MS', 5000, 2000)

const repoRoot = join(import.meta.dir, '..')

/** Deterministic key pairs, so seeded agents can sign later. */
function keys(n: number, salt: number): KeyPair[] {
  return Array.from({ length: n }, (_, i) => {
    const seed = new Uint8Array(32)
    new DataView(seed.buffer).setUint32(0, i)
    new DataView(seed.buffer).setUint32(4, salt)
    return keyPairFromSeed(seed)
  })
}

async function startServer(dataDir: string): Promise<{ proc: Subprocess; base: string }> {
  const port = await freePort()
  const proc = spawn(['bun', join(repoRoot, 'src/main.ts'), 'serve', '--data-dir', dataDir, '--port', String(port)], {
    cwd: repoRoot,
    env: { ...process.env, RELAY_RATE_SEND_PER_MIN: '0', RELAY_RATE_POLL_PER_MIN: '0', RELAY_LOG_LEVEL: 'error' },
    stdout: 'ignore',
    stderr: 'inherit',
  })
  const base = `http://127.0.0.1:${port}`
  for (let i = 0; i < 200; i++) {
    try {
      if ((await fetch(`${base}/v1/health`)).ok) return { proc, base }
    } catch {}
    await Bun.sleep(50)
  }
  throw new Error('relay did not start')
}

async function stopServer(proc: Subprocess): Promise<void> {
  proc.kill('SIGTERM')
  await proc.exited
}

function signedRequest(base: string, k: KeyPair, method: string, path: string, body?: unknown, atMs = Date.now()): Request {
  const bytes = body === undefined ? undefined : new TextEncoder().encode(JSON.stringify(body))
  const headers: Record<string, string> = { ...signRequest(k, method, path, bytes, new Date(atMs).toISOString()) }
  if (bytes) headers['content-type'] = 'application/json'
  return new Request(base + path, { method, headers, body: bytes })
}

/** Runs requests with `concurrency` in flight; returns elapsed ms and per-request latencies. */
async function fire(requests: Request[], concurrency: number, expectStatus: number) {
  const r = await runLoad(requests.length, concurrency, (i) => fetch(requests[i]))
  return { elapsedMs: r.elapsed, latencies: r.latencies, failures: requests.length - (r.statuses[expectStatus] ?? 0) }
}

const pct = percentile
const ms = (n: number) => `${n.toFixed(2)} ms`
const mib = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MiB`
const fileSize = (p: string) => {
  try {
    return statSync(p).size
  } catch {
    return 0
  }
}

// --- 1. send throughput -------------------------------------------------------------------------

async function benchSend() {
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-send-'))
  const { proc, base } = await startServer(dataDir)
  try {
    const senders = keys(SENDERS, 1)
    // every sender exists before timing (the first request of a key creates its agent)
    const warm = senders.map((k) => signedRequest(base, k, 'GET', `/v1/agents/${k.publicKey}`))
    await fire(warm, CONCURRENCY, 200)
    const t0 = performance.now()
    const requests = Array.from({ length: SENDS }, (_, i) => {
      const from = senders[i % SENDERS]
      const to = senders[(i * 7 + 1) % SENDERS]
      return signedRequest(base, from, 'POST', '/v1/messages', { recipient_key: to.publicKey, body: { n: i, text: 'benchmark message' } })
    })
    const signMs = performance.now() - t0
    const r = await fire(requests, CONCURRENCY, 201)
    const sorted = r.latencies.sort((a, b) => a - b)
    console.log(`send: ${SENDS} signed POST /v1/messages, ${SENDERS} senders, concurrency ${CONCURRENCY}`)
    console.log(`  throughput ${(SENDS / (r.elapsedMs / 1000)).toFixed(0)} sends/s (${ms(r.elapsedMs)}; pre-signing took ${ms(signMs)})`)
    console.log(`  latency p50 ${ms(pct(sorted, 50))}, p99 ${ms(pct(sorted, 99))}; non-201 answers: ${r.failures}`)
  } finally {
    await stopServer(proc)
    rmSync(dataDir, { recursive: true, force: true })
  }
}

// --- 2. poll latency ----------------------------------------------------------------------------

const INSERT_MESSAGE = `INSERT INTO messages (message_id, sender_key, recipient_key, content_type, body, attachments,
  thread_id, in_reply_to, metadata, status, created_at, expires_at, delivered_at) VALUES (?, ?, ?, ?, ?, NULL, ?, NULL, NULL, ?, ?, ?, ?)`

/** Bulk insert of `count` messages spread over `agents`, in transactions of 50k rows. */
function seedMessages(dbPath: string, agents: KeyPair[], count: number, opts: { expired?: boolean } = {}) {
  const c = openDatabase(dbPath)
  const now = Date.now()
  const insertAgent = c.prepare(`INSERT OR IGNORE INTO agents (public_key, created_at, updated_at, last_active_at) VALUES (?, ?, ?, ?)`)
  const insert = c.prepare(INSERT_MESSAGE)
  c.transaction(() => {
    for (const k of agents) insertAgent.run(k.publicKey, now, now, now)
  })()
  const body = JSON.stringify({ text: 'a message of ordinary size for the benchmark', n: 0, tags: ['a', 'b'] })
  const t0 = performance.now()
  const CHUNK = 50_000
  for (let start = 0; start < count; start += CHUNK) {
    c.transaction(() => {
      for (let i = start; i < Math.min(count, start + CHUNK); i++) {
        const created = now - 3_600_000 + Math.floor(i / agents.length)
        const expires = opts.expired ? now - 1000 - (i % 5000) : created + 7 * 86_400_000
        const delivered = opts.expired && i % 10 < 3
        insert.run(
          newMessageId(created),
          agents[(i * 31 + 7) % agents.length].publicKey,
          agents[i % agents.length].publicKey,
          'application/json',
          body,
          i % 20 === 0 ? `thread-${i % 97}` : null,
          delivered ? 'delivered' : 'sent',
          created,
          expires,
          delivered ? created + 1 : null,
        )
      }
    })()
  }
  const seedMs = performance.now() - t0
  c.run('PRAGMA wal_checkpoint(TRUNCATE)')
  c.close()
  return seedMs
}

async function benchPoll() {
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-poll-'))
  const dbPath = join(dataDir, 'relay.db')
  try {
    const agents = keys(AGENTS, 2)
    const seedMs = seedMessages(dbPath, agents, MESSAGES)
    const dbBytes = fileSize(dbPath) + fileSize(dbPath + '-wal')
    const { proc, base } = await startServer(dataDir)
    try {
      const polls = Array.from({ length: Math.min(POLLS, AGENTS) }, (_, i) =>
        signedRequest(base, agents[(i * 13) % AGENTS], 'GET', '/v1/messages?limit=100'),
      )
      await fire(polls.splice(0, Math.min(20, polls.length - 1)), 1, 200) // warm the page cache a little
      const r = await fire(polls, 1, 200)
      const sorted = r.latencies.sort((a, b) => a - b)
      console.log(`poll: ${MESSAGES} messages across ${AGENTS} agents (seeded in ${ms(seedMs)}), ${polls.length} polls of limit=100, one at a time`)
      console.log(`  latency p50 ${ms(pct(sorted, 50))}, p99 ${ms(pct(sorted, 99))}, max ${ms(sorted[sorted.length - 1])}; non-200: ${r.failures}`)
      console.log(`  database size ${mib(dbBytes)} (${(dbBytes / MESSAGES).toFixed(0)} bytes per message, ${((dbBytes / MESSAGES) * 1e6 / 2 ** 20).toFixed(0)} MiB per million)`)
    } finally {
      await stopServer(proc)
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true })
  }
}

// --- 3. sweep stall -----------------------------------------------------------------------------

async function benchSweep() {
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-sweep-'))
  try {
    const agents = keys(Math.min(1000, AGENTS), 3)
    seedMessages(join(dataDir, 'relay.db'), agents, SWEEP, { expired: true })
    const relay = createRelay(withOverrides({ dataDir, port: 0, logLevel: 'error', rateLimits: { sendPerMin: 0, pollPerMin: 0 } }), {
      clock: systemClock,
      logger: silentLogger,
    })
    const base = 'http://relay.bench'
    // probes: a 1 ms interval measuring how late it fires, and signed requests every 5 ms
    let maxLag = 0
    let last = performance.now()
    const probe = setInterval(() => {
      const t = performance.now()
      maxLag = Math.max(maxLag, t - last - 1)
      last = t
    }, 1)
    // signed sends, one every 5 ms, timed first for BASELINE_MS without the sweep, then during it
    const senders = keys(50, 4)
    let sweeping: boolean | null = false
    const baseline: number[] = []
    const during: number[] = []
    const sender = (async () => {
      let i = 0
      while (sweeping !== null) {
        const k = senders[i % senders.length]
        const to = agents[i++ % agents.length]
        const into = sweeping ? during : baseline
        const s = performance.now()
        const res = await relay.handle(signedRequest(base, k, 'POST', '/v1/messages', { recipient_key: to.publicKey, body: { n: i } }))
        await res.arrayBuffer()
        if (res.status === 201) into.push(performance.now() - s)
        await Bun.sleep(5)
      }
    })()
    await Bun.sleep(BASELINE_MS)
    sweeping = true
    maxLag = 0
    // the WAL's peak while the sweep writes: checkpoints must keep it bounded without stalling sends
    let walPeak = 0
    const walProbe = setInterval(() => {
      try {
        walPeak = Math.max(walPeak, statSync(join(dataDir, 'relay.db-wal')).size)
      } catch {}
    }, 100)
    const t0 = performance.now()
    const result = (await relay.scheduler.runNow('expire-messages')) as Record<string, number>
    const sweepMs = performance.now() - t0
    clearInterval(walProbe)
    sweeping = null
    await sender
    clearInterval(probe)
    await relay.stop()
    baseline.sort((a, b) => a - b)
    during.sort((a, b) => a - b)
    console.log(`sweep: ${SWEEP} messages past expiry (70 % sent, 30 % delivered)`)
    console.log(`  took ${ms(sweepMs)} in ${result.batches} batches: expired ${result.expired}, removed ${result.removed_delivered} (${(SWEEP / (sweepMs / 1000)).toFixed(0)} messages/s)`)
    console.log(`  WAL peak ${(walPeak / 1048576).toFixed(1)} MiB; longest event-loop stall ${ms(maxLag)}`)
    console.log(`  signed sends every 5 ms: without the sweep (${baseline.length}) p50 ${ms(pct(baseline, 50))}, p99 ${ms(pct(baseline, 99))}; during it (${during.length}) p50 ${ms(pct(during, 50))}, p99 ${ms(pct(during, 99))}, max ${ms(during[during.length - 1] ?? 0)}: p99 ×${(pct(during, 99) / pct(baseline, 99)).toFixed(2)}   (goal ≤ ×2)`)
  } finally {
    rmSync(dataDir, { recursive: true, force: true })
  }
}

console.log(`bench/messages.ts${QUICK ? ' (QUICK sizes)' : ''} — bun ${Bun.version}, ${navigator.hardwareConcurrency} cores, load average ${loadavg().map((n) => n.toFixed(1)).join(' ')}`)
const only = process.env.BENCH_ONLY
if (!only || only === 'send') await benchSend()
if (!only || only === 'poll') await benchPoll()
if (!only || only === 'sweep') await benchSweep()
