/**
 * Fair under attack: what strangers can take from the agents of a compiled relay, each attack run while
 * legitimate clients keep working, for one build or several side by side (a column each: before / after).
 *
 *  stalled   24 connections from 5 addresses each declare a 2 MiB JSON body with well-formed headers and
 *            a garbage signature, and trickle one byte every 5 s → % of legitimate signed sends answered
 *            201, and their p99 latency (measured in a process of its own).
 *  ws        idle unauthenticated WebSockets that never send a frame, reopened whenever closed or
 *            refused: 15 from 3 addresses, then 200 from 20 → % of legitimate WebSocket connects that
 *            authenticate.
 *  wsframes  64 unauthenticated sockets from 8 addresses each send most of a 2 MiB frame and stall (what
 *            the runtime buffers unseen by the relay) → RSS over idle.
 *  uploads   32 concurrent 100 MiB blob uploads with a garbage signature → peak RSS over the idle RSS,
 *            and % of legitimate signed sends answered 201 meanwhile.
 *  uploadsknown  the same, each naming one of 8 keys that have an agent record (not in the default parts).
 *  ipv6      100 /64s of one /56 (through a trusted proxy on loopback, which names them in
 *            X-Forwarded-For), each a fresh key, under a new-agent limit of 20 per address per hour →
 *            how many agents they created.
 *  maxagents 500 concurrent fresh keys under RELAY_MAX_AGENTS=50 → agent records created.
 *  soak      333 signed requests/s for --duration (default 30s; the reference run is 10m) with a
 *            signature tolerance of --tolerance (default 60s: entries are kept 2 × 60 + 60 s = 3 min)
 *            → replay log rows and WAL size, sampled over time.
 *
 * Attack and probe connections bind loopback source addresses (127.x.y.z), so each one is a client
 * address of its own; every relay here runs with RELAY_RATE_ADDRESS_EXEMPT empty unless said otherwise.
 *
 *   bun bench/abuse.ts BINARY [BINARY …] [--parts stalled,ws,uploads,ipv6,maxagents,soak]
 *                     [--duration 30s] [--tolerance 60s] [--attack 15s]
 *
 * e.g. `npm run build && cp dist/relay /tmp/after && bun bench/abuse.ts /tmp/before /tmp/after`.
 */
import { spawn, type Subprocess } from 'bun'
import { Database } from 'bun:sqlite'
import { randomBytes } from 'node:crypto'
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fmt, freePort, nativeAgent, percentile, rawRequest, rssMiB } from './lib.ts'

const MiB = 1024 * 1024
const args = process.argv.slice(2)
const flag = (name: string, def: string) => {
  const i = args.indexOf(`--${name}`)
  return i >= 0 ? args[i + 1] : def
}
const seconds = (text: string) => {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m)?$/.exec(text)
  if (!m) throw new Error(`not a duration: ${text}`)
  return Number(m[1]) * (m[2] === 'm' ? 60 : m[2] === 'ms' ? 0.001 : 1)
}

// --- probe mode: `--probe PORT RATE` sends signed messages until stdin closes, prints one JSON line ---
if (args[0] === '--probe') {
  const port = Number(args[1])
  const rate = Number(args[2])
  const agents = Array.from({ length: 8 }, () => nativeAgent())
  const latencies: number[] = []
  let ok = 0
  let total = 0
  const statuses: Record<number, number> = {}
  let stop = false
  void (async () => {
    for await (const _ of Bun.stdin.stream()) {
      // nothing: the parent closes stdin to stop
    }
    stop = true
  })()
  const pending: Promise<void>[] = []
  for (let i = 0; !stop; i++) {
    const a = agents[i % agents.length]
    const body = JSON.stringify({ recipient_key: agents[(i + 1) % agents.length].keys.publicKey, body: { n: i } })
    const headers = { ...a.sign('POST', '/v1/messages', new Date().toISOString(), body), 'Content-Type': 'application/json' }
    pending.push(
      rawRequest(port, `127.0.0.${2 + (i % 8)}`, 'POST', '/v1/messages', headers, body).then((r) => {
        total++
        if (r.status === 201) ok++
        statuses[r.status] = (statuses[r.status] ?? 0) + 1
        latencies.push(r.ms)
      }),
    )
    await Bun.sleep(1000 / rate)
  }
  await Promise.all(pending)
  latencies.sort((x, y) => x - y)
  console.log(JSON.stringify({ ok, total, statuses, p50: percentile(latencies, 50), p99: percentile(latencies, 99) }))
  process.exit(0)
}

const binaries = args.filter((a, i) => !a.startsWith('--') && !args[i - 1]?.startsWith('--'))
if (binaries.length === 0) {
  console.error('usage: bun bench/abuse.ts BINARY [BINARY …] [--parts …] [--duration 30s] [--tolerance 60s] [--attack 15s]')
  process.exit(2)
}
const PARTS = flag('parts', 'stalled,ws,wsframes,uploads,ipv6,maxagents,soak').split(',')
const SOAK_S = seconds(flag('duration', '30s'))
/** The soak's signature tolerance: an entry is kept 2 × this + 60 s, so the default 300 s outlasts a 10-minute run. */
const SOAK_TOLERANCE = flag('tolerance', '60s')
const ATTACK_S = seconds(flag('attack', '15s'))


const garbageHeaders = (): Record<string, string> => ({
  'X-M2M-Public-Key': randomBytes(32).toString('base64url'),
  'X-M2M-Timestamp': new Date().toISOString(),
  'X-M2M-Signature': randomBytes(64).toString('base64url'),
})

interface Relay {
  proc: Subprocess
  port: number
  dataDir: string
  stop(): Promise<void>
}

/** Starts `binary` with the relay's defaults except `env`; null when it refuses the environment. */
async function startRelay(binary: string, env: Record<string, string>): Promise<Relay | null> {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-abuse-'))
  const port = await freePort()
  const proc = spawn([binary, 'serve', '--port', String(port), '--data-dir', dataDir], {
    env: { PATH: process.env.PATH ?? '', RELAY_LOG_LEVEL: 'error', RELAY_RATE_ADDRESS_EXEMPT: '', ...env },
    stdout: 'ignore',
    stderr: 'pipe',
  })
  const t0 = Date.now()
  for (;;) {
    if (proc.exitCode !== null) {
      rmSync(dataDir, { recursive: true, force: true })
      return null
    }
    try {
      if ((await fetch(`http://127.0.0.1:${port}/v1/health/ready`)).status === 200) break
    } catch {}
    if (Date.now() - t0 > 15_000) throw new Error(`${binary} not ready`)
    await Bun.sleep(20)
  }
  return {
    proc,
    port,
    dataDir,
    async stop() {
      proc.kill('SIGTERM')
      await proc.exited
      rmSync(dataDir, { recursive: true, force: true })
    },
  }
}

/** Legitimate signed sends in a process of their own (its latency is the relay's, not this loop's). */
function sendProbe(port: number, rate = 10) {
  const child = spawn([process.execPath, import.meta.path, '--probe', String(port), String(rate)], { stdin: 'pipe', stdout: 'pipe', stderr: 'inherit' })
  return {
    async finish(): Promise<{ ok: number; total: number; statuses: Record<string, number>; p50: number; p99: number }> {
      child.stdin.end()
      return JSON.parse((await new Response(child.stdout).text()).trim())
    },
  }
}

const pct = (ok: number, total: number, statuses?: Record<string, number>) =>
  `${fmt((100 * ok) / Math.max(1, total), 1)} % of ${total}${statuses ? ` ${JSON.stringify(statuses)}` : ''}`

// the agents' per-key limits are off: the probes send more than 30 a minute
const BASE_ENV = { RELAY_RATE_SEND_PER_MIN: '0', RELAY_RATE_POLL_PER_MIN: '0', RELAY_RATE_REQUESTS_PER_MIN: '0' }

// --- the attacks: each returns its figures as label → text ---

async function stalled(binary: string): Promise<Record<string, string>> {
  const relay = (await startRelay(binary, BASE_ENV))!
  const sockets: Socket[] = []
  for (let i = 0; i < 24; i++) {
    const s = connect({ host: '127.0.0.1', port: relay.port, localAddress: `127.0.10.${1 + (i % 5)}` })
    s.on('error', () => {})
    s.on('connect', () => {
      const head = Object.entries(garbageHeaders()).map(([k, v]) => `${k}: ${v}\r\n`).join('')
      s.write(`POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${2 * MiB}\r\n${head}\r\n{`)
    })
    sockets.push(s)
  }
  const trickle = setInterval(() => sockets.forEach((s) => s.writable && s.write(' ')), 5000)
  await Bun.sleep(500)
  const probe = sendProbe(relay.port)
  await Bun.sleep(ATTACK_S * 1000)
  const r = await probe.finish()
  clearInterval(trickle)
  sockets.forEach((s) => s.destroy())
  await relay.stop()
  return { 'stalled 2 MiB bodies (24 from 5 addresses): legit sends 201': pct(r.ok, r.total, r.statuses), 'stalled bodies: legit send p99': `${fmt(r.p99, 1)} ms` }
}

/** Keeps `perAddress` silent sockets open from each address, reopened when closed or refused. */
function idleSockets(port: number, addresses: string[], perAddress: number) {
  let stopped = false
  const open = new Set<Socket>()
  const one = (localAddress: string) => {
    if (stopped) return
    const s = connect({ host: '127.0.0.1', port, localAddress })
    open.add(s)
    s.on('connect', () =>
      s.write(`GET /v1/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n\r\n`),
    )
    s.on('error', () => {})
    s.on('close', () => {
      open.delete(s)
      setTimeout(() => one(localAddress), 50)
    })
  }
  for (const a of addresses) for (let i = 0; i < perAddress; i++) one(a)
  return () => {
    stopped = true
    for (const s of open) s.destroy()
  }
}

/** Legitimate WebSocket connects for `ms`: each authenticates (5 keys, reused) and closes. */
async function legitimateSockets(port: number, ms: number) {
  const agents = Array.from({ length: 5 }, () => nativeAgent())
  let ok = 0
  let total = 0
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    const a = agents[total++ % agents.length]
    const passed = await new Promise<boolean>((resolve) => {
      const ws = new WebSocket(`ws://127.0.0.1:${port}/v1/ws?key=${a.keys.publicKey}`)
      const timer = setTimeout(() => (ws.close(), resolve(false)), 5000)
      ws.onopen = () => {
        const ts = new Date().toISOString()
        ws.send(JSON.stringify({ type: 'auth', public_key: a.keys.publicKey, timestamp: ts, signature: a.signText(`WS\n${ts}`) }))
      }
      ws.onmessage = (e) => {
        const f = JSON.parse(String(e.data))
        if (f.type !== 'auth_result') return
        clearTimeout(timer)
        ws.close()
        resolve(f.status === 'ok')
      }
      ws.onerror = () => (clearTimeout(timer), resolve(false))
      ws.onclose = () => (clearTimeout(timer), resolve(false))
    })
    if (passed) ok++
    await Bun.sleep(50)
  }
  return { ok, total }
}

async function ws(binary: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {}
  for (const [addresses, perAddress] of [
    [3, 5],
    [20, 10],
  ] as const) {
    const relay = (await startRelay(binary, BASE_ENV))!
    const stop = idleSockets(relay.port, Array.from({ length: addresses }, (_, i) => `127.0.11.${i + 1}`), perAddress)
    await Bun.sleep(500)
    const r = await legitimateSockets(relay.port, ATTACK_S * 1000)
    stop()
    await relay.stop()
    out[`${addresses * perAddress} idle sockets from ${addresses} addresses: legit WS auth ok`] = pct(r.ok, r.total)
  }
  return out
}

/** The frame header of a masked client text frame declaring `length` payload bytes (64-bit length form). */
function frameHeader(length: number): Buffer {
  const h = Buffer.alloc(14)
  h[0] = 0x81
  h[1] = 0x80 | 127
  h.writeBigUInt64BE(BigInt(length), 2)
  randomBytes(4).copy(h, 10)
  return h
}

async function wsFrames(binary: string): Promise<Record<string, string>> {
  // what the relay cannot see: unauthenticated sockets that send most of a 2 MiB frame and stall
  const relay = (await startRelay(binary, BASE_ENV))!
  await Bun.sleep(500)
  const idle = rssMiB(relay.proc.pid)
  const sockets: Socket[] = []
  let upgraded = 0
  await Promise.all(
    Array.from({ length: 64 }, (_, i) => {
      return new Promise<void>((resolve) => {
        const s = connect({ host: '127.0.0.1', port: relay.port, localAddress: `127.0.14.${1 + (i % 8)}` })
        sockets.push(s)
        let got = ''
        s.on('error', () => resolve())
        s.on('close', () => resolve())
        s.on('connect', () =>
          s.write(`GET /v1/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n\r\n`),
        )
        s.on('data', (d) => {
          if (got.includes('\r\n\r\n')) return
          got += d.toString('latin1')
          if (!got.includes('\r\n\r\n')) return
          if (!got.startsWith('HTTP/1.1 101')) return resolve()
          upgraded++
          s.write(Buffer.concat([frameHeader(2 * MiB - 16), Buffer.alloc(2 * MiB - 64 * 1024, 0x20)]), () => resolve())
        })
      })
    }),
  )
  await Bun.sleep(1500)
  const held = rssMiB(relay.proc.pid)
  sockets.forEach((s) => s.destroy())
  await relay.stop()
  return { '64 unauthenticated sockets from 8 addresses each stalling in a 2 MiB frame: RSS over idle': `+${fmt(held - idle, 0)} MiB (${upgraded} upgraded)` }
}

async function uploads(binary: string): Promise<Record<string, string>> {
  return forgedUploads(binary, false)
}

/** The same, each forged upload naming one of 8 keys that have an agent record (public keys are public). */
async function uploadsKnown(binary: string): Promise<Record<string, string>> {
  return forgedUploads(binary, true)
}

async function forgedUploads(binary: string, namingKnownKeys: boolean): Promise<Record<string, string>> {
  const relay = (await startRelay(binary, BASE_ENV))!
  const known = Array.from({ length: 8 }, () => nativeAgent())
  if (namingKnownKeys) {
    for (const a of known) {
      const path = `/v1/agents/${a.keys.publicKey}`
      await (await fetch(`http://127.0.0.1:${relay.port}${path}`, { headers: a.sign('GET', path, new Date().toISOString()) })).arrayBuffer()
    }
  }
  await Bun.sleep(1000)
  const idle = rssMiB(relay.proc.pid)
  let peak = idle
  const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(relay.proc.pid))), 100)
  const probe = sendProbe(relay.port)
  const size = 100 * MiB
  const chunk = Buffer.alloc(MiB, 0x42)
  const t0 = performance.now()
  const answers = await Promise.all(
    Array.from({ length: 32 }, (_, i) => {
      return new Promise<string>((resolve) => {
        const s = connect({ host: '127.0.0.1', port: relay.port, localAddress: `127.0.12.${1 + (i % 8)}` })
        let got = ''
        s.on('data', (d) => (got += d.toString('latin1')))
        s.on('error', () => {})
        s.on('close', () => resolve(/^HTTP\/1\.1 (\d+)/.exec(got)?.[1] ?? 'none'))
        s.on('connect', async () => {
          const forged = { ...garbageHeaders(), ...(namingKnownKeys ? { 'X-M2M-Public-Key': known[i % known.length].keys.publicKey } : {}) }
          const head = Object.entries(forged).map(([k, v]) => `${k}: ${v}\r\n`).join('')
          s.write(`POST /v1/blobs HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/octet-stream\r\nContent-Length: ${size}\r\n${head}\r\n`)
          for (let sent = 0; sent < size && !s.destroyed && !got; sent += MiB) {
            if (!s.write(chunk)) await new Promise((r) => s.once('drain', r))
          }
        })
      })
    }),
  )
  const seconds = (performance.now() - t0) / 1000
  const r = await probe.finish()
  clearInterval(sampler)
  peak = Math.max(peak, rssMiB(relay.proc.pid))
  await relay.stop()
  const counts: Record<string, number> = {}
  for (const a of answers) counts[a] = (counts[a] ?? 0) + 1
  const label = namingKnownKeys ? '32 garbage-signed 100 MiB uploads naming 8 known keys' : '32 garbage-signed 100 MiB uploads'
  return {
    [`${label}: peak RSS over idle`]: `+${fmt(peak - idle, 0)} MiB (idle ${fmt(idle, 0)}; answers ${JSON.stringify(counts)} in ${fmt(seconds, 1)} s)`,
    [`${label}: legit sends 201`]: `${pct(r.ok, r.total, r.statuses)}, p99 ${fmt(r.p99, 1)} ms`,
  }
}

async function ipv6(binary: string): Promise<Record<string, string>> {
  // a proxy on loopback names the client; older builds take `true` where newer ones want its address
  const env = { ...BASE_ENV, RELAY_RATE_NEW_AGENTS_PER_HOUR: '20', RELAY_RATE_ADDRESS_PER_MIN: '0' }
  const relay = (await startRelay(binary, { ...env, RELAY_TRUST_PROXY: '127.0.0.1,::1' })) ?? (await startRelay(binary, { ...env, RELAY_TRUST_PROXY: 'true' }))!
  let created = 0
  let limited = 0
  await Promise.all(
    Array.from({ length: 100 }, async (_, i) => {
      const a = nativeAgent()
      const path = `/v1/agents/${a.keys.publicKey}`
      const xff = `2001:db8:1:${(0x3400 + i).toString(16)}::1`
      const r = await rawRequest(relay.port, '127.0.0.1', 'GET', path, { ...a.sign('GET', path, new Date().toISOString()), 'X-Forwarded-For': xff })
      if (r.status === 200) created++
      if (r.status === 429) limited++
    }),
  )
  await relay.stop()
  return { '100 /64s of one /56, new-agent limit 20/h: agents created': `${created} (429: ${limited})` }
}

async function maxAgents(binary: string): Promise<Record<string, string>> {
  const relay = (await startRelay(binary, { ...BASE_ENV, RELAY_MAX_AGENTS: '50', RELAY_RATE_NEW_AGENTS_PER_HOUR: '0', RELAY_RATE_ADDRESS_PER_MIN: '0' }))!
  const agents = Array.from({ length: 500 }, () => nativeAgent())
  const statuses: Record<number, number> = {}
  await Promise.all(
    agents.map(async (a, i) => {
      const path = `/v1/agents/${a.keys.publicKey}`
      const r = await rawRequest(relay.port, `127.0.13.${1 + (i % 200)}`, 'GET', path, a.sign('GET', path, new Date().toISOString()))
      statuses[r.status] = (statuses[r.status] ?? 0) + 1
    }),
  )
  const dataDir = relay.dataDir
  relay.proc.kill('SIGTERM')
  await relay.proc.exited
  const db = new Database(join(dataDir, 'relay.db'), { readonly: true })
  const n = (db.query('SELECT count(*) AS n FROM agents').get() as { n: number }).n
  db.close()
  rmSync(dataDir, { recursive: true, force: true })
  return { '500 concurrent fresh keys, RELAY_MAX_AGENTS=50: agent records': `${n} (answers ${JSON.stringify(statuses)})` }
}

async function soak(binary: string): Promise<Record<string, string>> {
  // the load generator is one process on 127.0.0.1: exempt from per-address limits, as a local one is
  const relay = (await startRelay(binary, { ...BASE_ENV, RELAY_RATE_ADDRESS_EXEMPT: '127.0.0.0/8,::1', RELAY_TIMESTAMP_TOLERANCE: SOAK_TOLERANCE }))!
  const agents = Array.from({ length: 200 }, () => nativeAgent())
  // the replay log lives in replay.db beside relay.db (older builds: in relay.db); both WALs are shown
  const file = (name: string) => join(relay.dataDir, name)
  const walMiB = (name: string) => (existsSync(file(`${name}-wal`)) ? statSync(file(`${name}-wal`)).size / MiB : 0)
  const sample = () => {
    const log = existsSync(file('replay.db')) ? 'replay.db' : 'relay.db'
    const d = new Database(file(log), { readonly: true })
    const rows = (d.query('SELECT count(*) AS n FROM replay_log').get() as { n: number }).n
    d.close()
    return { rows, wal: walMiB(log === 'replay.db' ? 'replay.db' : 'relay.db'), relayWal: walMiB('relay.db'), separate: log === 'replay.db' }
  }
  const samples: string[] = []
  const every = Math.max(5, SOAK_S / 10)
  let ok = 0
  let total = 0
  let next = 0
  const t0 = performance.now()
  let nextSample = every
  const inFlight = new Set<Promise<void>>()
  const url = `http://127.0.0.1:${relay.port}`
  while (performance.now() - t0 < SOAK_S * 1000) {
    const due = Math.floor(((performance.now() - t0) / 1000) * 333)
    while (next < due && inFlight.size < 256) {
      const a = agents[next++ % agents.length]
      const path = `/v1/agents/${a.keys.publicKey}`
      const p: Promise<void> = fetch(url + path, { headers: a.sign('GET', path, new Date().toISOString()) })
        .then(async (r) => {
          await r.arrayBuffer()
          total++
          if (r.status === 200) ok++
        })
        .catch(() => void total++)
        .finally(() => inFlight.delete(p))
      inFlight.add(p)
    }
    if ((performance.now() - t0) / 1000 >= nextSample) {
      const s = sample()
      samples.push(`${fmt(nextSample, 0)}s: ${s.rows} rows, WAL ${fmt(s.wal, 1)} MiB${s.separate ? ` (relay.db WAL ${fmt(s.relayWal, 1)})` : ''}`)
      nextSample += every
    }
    await Bun.sleep(5)
  }
  await Promise.all(inFlight)
  const end = sample()
  samples.push(`end: ${end.rows} rows, WAL ${fmt(end.wal, 1)} MiB${end.separate ? ` (relay.db WAL ${fmt(end.relayWal, 1)})` : ''}`)
  await relay.stop()
  return {
    [`soak 333 signed req/s for ${SOAK_S} s (tolerance ${SOAK_TOLERANCE}): requests ok`]: pct(ok, total),
    'soak: replay log rows and WAL over time': samples.join('; '),
  }
}

const ATTACKS: Record<string, (binary: string) => Promise<Record<string, string>>> = { stalled, ws, wsframes: wsFrames, uploads, uploadsknown: uploadsKnown, ipv6, maxagents: maxAgents, soak }

const columns: Record<string, string>[] = []
for (const binary of binaries) {
  const figures: Record<string, string> = {}
  for (const part of PARTS) {
    const run = ATTACKS[part]
    if (!run) throw new Error(`unknown part ${part}`)
    const got = await run(binary)
    for (const [k, v] of Object.entries(got)) {
      figures[k] = v
      console.log(`[${binary}] ${k}: ${v}`)
    }
  }
  columns.push(figures)
}

console.log(`\n| figure | ${binaries.join(' | ')} |\n|---|${binaries.map(() => '---').join('|')}|`)
for (const k of Object.keys(columns[0])) console.log(`| ${k} | ${columns.map((c) => c[k] ?? '').join(' | ')} |`)
