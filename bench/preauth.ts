/**
 * What clients that never sign anything (or sign with throw-away keys) cost the relay binary:
 *
 *  1. RSS while 1,000 connections each declare a 2 MiB JSON body and send all but its last byte, with no
 *     signature headers (a) and with well-formed but forged ones (b); meanwhile signed requests from other
 *     addresses measure p50/p99 latency.
 *  2. RSS while 300 WebSockets that never authenticate each hold an unfinished 2 MiB frame.
 *  3. Peak bytes in the upload temp directory while 8 unsigned 100 MiB blob uploads stream in, and RSS
 *     while 200 unsigned uploads each send 900 KiB and stall.
 *  4. /v1/health and signed-send latency while another process holds the SQLite write lock.
 *  5. A flood of requests each signed by a fresh key, under each admission mode: open (every key becomes
 *     an agent, up to the per-address new-agent rate), allowlist and existing (refused, nothing stored).
 *
 * Attack connections come from many loopback source addresses (127.0.x.y), as a distributed attacker's
 * would, so per-address limits alone do not stop them; the probes use addresses of their own.
 *
 *   bun bench/preauth.ts   RELAY_BINARY=path (default dist/relay, built first)
 *   ABUSE_CONNS=1000 ABUSE_HOLD_S=10 ABUSE_WS=300 ABUSE_UPLOADS=8 ABUSE_UPLOAD_MIB=100 ABUSE_LOCK_S=10
 *   ABUSE_FLOOD_S=5 ABUSE_STALLED=200 ABUSE_PARTS=body,ws,disk,stalled,lock,flood
 */
import { spawn } from 'bun'
import { randomBytes } from 'node:crypto'
import { readdirSync, statSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import { join } from 'node:path'
import { ensureBinary, fmt, nativeAgent, percentile, rawRequest as rawRequestTo, rssMiB, startRelayBinary } from './lib.ts'

const CONNS = Number(process.env.ABUSE_CONNS ?? 1000)
const HOLD_S = Number(process.env.ABUSE_HOLD_S ?? 10)
const WS_CONNS = Number(process.env.ABUSE_WS ?? 300)
const UPLOADS = Number(process.env.ABUSE_UPLOADS ?? 8)
const UPLOAD_MIB = Number(process.env.ABUSE_UPLOAD_MIB ?? 100)
const LOCK_S = Number(process.env.ABUSE_LOCK_S ?? 10)
const FLOOD_S = Number(process.env.ABUSE_FLOOD_S ?? 5)
const PARTS = new Set((process.env.ABUSE_PARTS ?? 'body,ws,disk,stalled,lock,flood').split(','))
const MiB = 1024 * 1024

/** `--probe PORT get|send RATE`: this script as the probe process (see probeProcess). */
const PROBE = process.argv[2] === '--probe'
if (!PROBE) ensureBinary()
// the relay's defaults, except the per-agent limits (the probes send more than 30 a minute)
const relay = PROBE ? null : await startRelayBinary({ RELAY_RATE_SEND_PER_MIN: '0', RELAY_RATE_POLL_PER_MIN: '0', RELAY_RATE_ADDRESS_PER_MIN: '600', RELAY_RATE_ADDRESS_EXEMPT: '' })
let port = relay?.port ?? Number(process.argv[3])
let proc = relay?.proc as NonNullable<typeof relay>['proc']
let dataDir = relay?.dataDir as string
if (relay) console.log(`relay ${process.env.RELAY_BINARY ?? 'dist/relay'} on :${port}, ready in ${fmt(relay.readyMs, 0)} ms`)

/** Loopback source address number i (127.0.x.y, never 127.0.0.1 or the probes' 127.0.0.2–9). */
const attacker = (i: number) => `127.${1 + Math.floor(i / 250)}.${Math.floor(i / 250) % 250}.${(i % 250) + 1}`
const probeAddr = (i: number) => `127.0.0.${2 + (i % 8)}`

/** A raw request to the relay under test, on whatever port it listens now. */
const rawRequest = (...args: Parameters<typeof rawRequestTo> extends [number, ...infer R] ? R : never) => rawRequestTo(port, ...args)


/** Signed requests from probe addresses until stopped: latency and status counts. */
function probe(kind: 'get' | 'send', ratePerS = 20) {
  const agents = Array.from({ length: 8 }, () => nativeAgent())
  const latencies: number[] = []
  const statuses = new Map<number, number>()
  let stop = false
  let i = 0
  const running = (async () => {
    while (!stop) {
      const a = agents[i % agents.length]
      const ts = new Date().toISOString()
      const n = i++
      const req =
        kind === 'get'
          ? rawRequest(probeAddr(n), 'GET', `/v1/agents/${a.keys.publicKey}`, a.sign('GET', `/v1/agents/${a.keys.publicKey}`, ts))
          : (() => {
              const body = JSON.stringify({ recipient_key: agents[(n + 1) % agents.length].keys.publicKey, body: { n } })
              return rawRequest(probeAddr(n), 'POST', '/v1/messages', { ...a.sign('POST', '/v1/messages', ts, body), 'Content-Type': 'application/json' }, body)
            })()
      void req.then((r) => {
        latencies.push(r.ms)
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1)
        if (r.status >= 300 && process.env.ABUSE_VERBOSE) console.log(r.status, r.body)
      })
      await Bun.sleep(1000 / ratePerS)
    }
  })()
  return {
    async finish() {
      stop = true
      await running
      await Bun.sleep(200)
      latencies.sort((x, y) => x - y)
      return `signed ${kind}: ${latencies.length} requests, p50 ${fmt(percentile(latencies, 50))} ms, p99 ${fmt(percentile(latencies, 99))} ms, max ${fmt(latencies.at(-1) ?? NaN)} ms, statuses ${JSON.stringify(Object.fromEntries(statuses))}`
    },
  }
}

/**
 * The probe in a process of its own, so that what it measures is the relay's latency and not the
 * attacking loops' load on this process's event loop. `finish` ends it and returns its summary line.
 */
function probeProcess(kind: 'get' | 'send', ratePerS = 20) {
  const child = spawn([process.execPath, import.meta.path, '--probe', String(port), kind, String(ratePerS)], { stdin: 'pipe', stdout: 'pipe', stderr: 'inherit' })
  return {
    async finish() {
      child.stdin.end()
      return (await new Response(child.stdout).text()).trim()
    },
  }
}

/** Samples the relay's RSS every 100 ms until stopped; returns the peak. */
function rssSampler() {
  let peak = rssMiB(proc.pid)
  const timer = setInterval(() => (peak = Math.max(peak, rssMiB(proc.pid))), 100)
  return () => {
    clearInterval(timer)
    return Math.max(peak, rssMiB(proc.pid))
  }
}

async function settle(): Promise<number> {
  await Bun.sleep(1500)
  return rssMiB(proc.pid)
}

/** A forged but well-formed header set: random key, fresh timestamp, random signature. */
function forgedHeaders(): Record<string, string> {
  return {
    'X-M2M-Public-Key': randomBytes(32).toString('base64url'),
    'X-M2M-Timestamp': new Date().toISOString(),
    'X-M2M-Signature': randomBytes(64).toString('base64url'),
  }
}

/** 1. slow 2 MiB bodies */
async function slowBodies(label: string, headers: () => Record<string, string>) {
  const declared = 2 * MiB
  const body = Buffer.alloc(declared - 1, 0x20)
  const before = rssMiB(proc.pid)
  const peak = rssSampler()
  const burst = probeProcess('get')
  const burstStarted = performance.now()
  const statuses = new Map<string, number>()
  const sockets: Socket[] = []
  let written = 0
  await Promise.all(
    Array.from({ length: CONNS }, (_, i) => {
      return new Promise<void>((resolve) => {
        const s = connect({ host: '127.0.0.1', port, localAddress: attacker(i) })
        sockets.push(s)
        let got = ''
        s.on('data', (d) => {
          if (!got) {
            got = d.toString('latin1')
            const code = /^HTTP\/1\.1 (\d+)/.exec(got)?.[1] ?? '?'
            statuses.set(code, (statuses.get(code) ?? 0) + 1)
          }
        })
        s.on('error', () => {})
        s.on('connect', () => {
          const head = Object.entries(headers()).map(([k, v]) => `${k}: ${v}\r\n`).join('')
          s.write(`POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${declared}\r\n${head}\r\n`)
          s.write(body, () => {
            written++
            resolve()
          })
        })
        s.on('close', () => resolve())
      })
    }),
  )
  // signed requests while the bodies arrive (a bandwidth flood on the same two cores), then while they are held
  const burstS = (performance.now() - burstStarted) / 1000
  const burstLine = await burst.finish()
  const held = probeProcess('get')
  await Bun.sleep(HOLD_S * 1000)
  const peakMiB = peak()
  const answered = [...statuses.values()].reduce((a, b) => a + b, 0)
  const heldLine = await held.finish()
  for (const s of sockets) s.destroy()
  console.log(
    `slow bodies (${label}): ${CONNS} connections × 2 MiB declared, ${written} wrote all but the last byte, held ${HOLD_S} s; ` +
      `answered before the last byte: ${answered} ${JSON.stringify(Object.fromEntries(statuses))}`,
  )
  console.log(`  RSS ${fmt(before, 0)} → peak ${fmt(peakMiB, 0)} MiB (+${fmt(peakMiB - before, 0)}), after close ${fmt(await settle(), 0)} MiB`)
  console.log(`  while ${fmt((CONNS * 2 * MiB) / 2 ** 30, 1)} GiB arrived (${fmt(burstS, 1)} s): ${burstLine}`)
  console.log(`  while the bodies were held (${HOLD_S} s): ${heldLine}`)
}

/** 2. WebSockets that hold an unfinished 2 MiB frame before authenticating */
async function wsPartialFrames() {
  const before = rssMiB(proc.pid)
  const peak = rssSampler()
  const payload = 2 * MiB - 64
  const chunk = Buffer.alloc(payload - 1, 0x41)
  const outcome = new Map<string, number>()
  const count = (k: string) => outcome.set(k, (outcome.get(k) ?? 0) + 1)
  const sockets: Socket[] = []
  await Promise.all(
    Array.from({ length: WS_CONNS }, (_, i) => {
      return new Promise<void>((resolve) => {
        const s = connect({ host: '127.0.0.1', port, localAddress: attacker(i) })
        sockets.push(s)
        let upgraded = false
        s.on('error', () => {})
        s.on('close', () => {
          if (!upgraded) count('closed before answer')
          resolve()
        })
        s.on('connect', () =>
          s.write(
            `GET /v1/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
          ),
        )
        s.once('data', (d) => {
          const status = /^HTTP\/1\.1 (\d+)/.exec(d.toString('latin1'))?.[1] ?? '?'
          count(status)
          if (status !== '101') return resolve()
          upgraded = true
          // text frame, masked, 64-bit length; all but the last payload byte
          const header = Buffer.alloc(14)
          header[0] = 0x81
          header[1] = 0x80 | 127
          header.writeBigUInt64BE(BigInt(payload), 2)
          randomBytes(4).copy(header, 10)
          s.write(header)
          s.write(chunk, () => resolve())
        })
      })
    }),
  )
  await Bun.sleep(Math.min(HOLD_S, 8) * 1000)
  const peakMiB = peak()
  for (const s of sockets) s.destroy()
  console.log(`websockets: ${WS_CONNS} unauthenticated, each an unfinished ${fmt(payload / MiB, 2)} MiB frame; handshake answers ${JSON.stringify(Object.fromEntries(outcome))}`)
  console.log(`  RSS ${fmt(before, 0)} → peak ${fmt(peakMiB, 0)} MiB (+${fmt(peakMiB - before, 0)}), after close ${fmt(await settle(), 0)} MiB`)
}

/** Bytes of the files in `dir` (not below it), or of the files named `only`. */
function dirBytes(dir: string, only?: string): number {
  let total = 0
  try {
    for (const name of only ? [only] : readdirSync(dir)) {
      try {
        total += statSync(join(dir, name)).size
      } catch {}
    }
  } catch {}
  return total
}

/** 3. unsigned blob uploads and the temp directory */
async function unsignedUploads() {
  const size = UPLOAD_MIB * MiB
  const tmp = join(dataDir, 'tmp')
  let peak = 0
  const timer = setInterval(() => (peak = Math.max(peak, dirBytes(tmp))), 20)
  const chunk = Buffer.alloc(MiB, 0x42)
  const t0 = performance.now()
  const results = await Promise.all(
    Array.from({ length: UPLOADS }, (_, i) => {
      return new Promise<string>((resolve) => {
        const s = connect({ host: '127.0.0.1', port, localAddress: attacker(i) })
        let got = ''
        s.on('data', (d) => (got += d.toString('latin1')))
        s.on('error', () => {})
        s.on('close', () => resolve(/^HTTP\/1\.1 (\d+)/.exec(got)?.[1] ?? 'no answer'))
        s.on('connect', async () => {
          const head = Object.entries(forgedHeaders()).map(([k, v]) => `${k}: ${v}\r\n`).join('')
          s.write(`POST /v1/blobs HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/octet-stream\r\nContent-Length: ${size}\r\n${head}\r\n`)
          for (let sent = 0; sent < size && !s.destroyed; sent += MiB) {
            if (!s.write(chunk)) await new Promise((r) => s.once('drain', r))
          }
        })
      })
    }),
  )
  clearInterval(timer)
  const counts = new Map<string, number>()
  for (const r of results) counts.set(r, (counts.get(r) ?? 0) + 1)
  console.log(
    `unsigned uploads: ${UPLOADS} × ${UPLOAD_MIB} MiB with forged signatures in ${fmt((performance.now() - t0) / 1000, 1)} s; answers ${JSON.stringify(Object.fromEntries(counts))}; ` +
      `peak temp-file bytes ${fmt(peak / MiB, 1)} MiB`,
  )
}

/** 3b. unsigned uploads that send a little and then stall (memory, not disk) */
async function stalledUploads() {
  const n = Number(process.env.ABUSE_STALLED ?? 200)
  const part = Buffer.alloc(900 * 1024, 0x43)
  const before = rssMiB(proc.pid)
  const peak = rssSampler()
  const sockets: Socket[] = []
  for (let i = 0; i < n; i++) {
    const s = connect({ host: '127.0.0.1', port, localAddress: attacker(i) })
    sockets.push(s)
    s.on('error', () => {})
    s.on('connect', () => {
      const head = Object.entries(forgedHeaders()).map(([k, v]) => `${k}: ${v}\r\n`).join('')
      // half of them chunked, half declaring 100 MiB
      const framing = i % 2 ? `Transfer-Encoding: chunked\r\n` : `Content-Length: ${100 * MiB}\r\n`
      s.write(`POST /v1/blobs HTTP/1.1\r\nHost: 127.0.0.1\r\n${framing}${head}\r\n${i % 2 ? `${part.length.toString(16)}\r\n` : ''}`)
      s.write(part)
    })
  }
  await Bun.sleep(6000)
  const settled = rssMiB(proc.pid)
  const peakMiB = peak()
  for (const s of sockets) s.destroy()
  console.log(`stalled uploads: ${n} unsigned uploads send 900 KiB and stop; RSS ${fmt(before, 0)} → peak ${fmt(peakMiB, 0)} MiB (+${fmt(peakMiB - before, 0)}), after 6 s ${fmt(settled, 0)} MiB (+${fmt(settled - before, 0)}), after close ${fmt(await settle(), 0)} MiB`)
}

/** 4. another process holds the database's write lock */
async function lockedDatabase() {
  const db = join(dataDir, 'relay.db')
  const holder = spawn(
    [process.execPath, '-e', `const { Database } = require('bun:sqlite'); const d = new Database(${JSON.stringify(db)}); d.run('PRAGMA busy_timeout=5000'); d.run('BEGIN EXCLUSIVE'); console.log('locked'); await Bun.sleep(${LOCK_S * 1000}); d.run('COMMIT'); console.log('released')`],
    { stdout: 'pipe', stderr: 'inherit' },
  )
  const reader = (holder.stdout as ReadableStream<Uint8Array>).getReader()
  await reader.read() // "locked"
  const sends = probeProcess('send', 10)
  const health: number[] = []
  const lockedUntil = performance.now() + LOCK_S * 1000
  while (performance.now() < lockedUntil) {
    const t0 = performance.now()
    const r = await rawRequest(probeAddr(0), 'GET', '/v1/health', {})
    health.push(performance.now() - t0)
    void r
    await Bun.sleep(50)
  }
  await holder.exited
  const sendLine = await sends.finish()
  health.sort((a, b) => a - b)
  console.log(`database write lock held ${LOCK_S} s by another process: /v1/health ${health.length} requests, p50 ${fmt(percentile(health, 50))} ms, max ${fmt(health.at(-1) ?? NaN)} ms; ${sendLine}`)
}

/** 5. every request from a fresh key */
async function freshKeyFlood(mode = 'open') {
  const before = rssMiB(proc.pid)
  const dbFiles = () => `relay.db ${fmt(dirBytes(dataDir, 'relay.db') / MiB, 1)} MiB, WAL ${fmt(dirBytes(dataDir, 'relay.db-wal') / MiB, 1)} MiB`
  const filesBefore = dbFiles()
  const deadline = performance.now() + FLOOD_S * 1000
  const statuses = new Map<number, number>()
  let n = 0
  await Promise.all(
    Array.from({ length: 32 }, async (_, w) => {
      while (performance.now() < deadline) {
        const a = nativeAgent()
        const ts = new Date().toISOString()
        const path = `/v1/agents/${a.keys.publicKey}`
        const r = await rawRequest(attacker(w * 7 + (n++ % 7)), 'GET', path, a.sign('GET', path, ts))
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1)
      }
    }),
  )
  const created = statuses.get(200) ?? 0
  console.log(
    `fresh-key flood (${mode} admission), ${FLOOD_S} s from 224 addresses: ${n} requests (${fmt(n / FLOOD_S, 0)}/s), statuses ${JSON.stringify(Object.fromEntries(statuses))}, ` +
      `${created} agents answered; RSS ${fmt(before, 0)} → ${fmt(rssMiB(proc.pid), 0)} MiB, database ${filesBefore} → ${dbFiles()}`,
  )
}

if (PROBE) {
  const p = probe(process.argv[4] as 'get' | 'send', Number(process.argv[5]))
  for await (const _ of Bun.stdin.stream()) void _
  console.log(await p.finish())
  process.exit(0)
}

// warm up: a few signed requests so that workers and caches exist before the baseline
{
  const p = probeProcess('get', 50)
  await Bun.sleep(1000)
  console.log(`warm-up ${await p.finish()}; idle RSS ${fmt(await settle(), 0)} MiB`)
}
if (PARTS.has('body')) {
  await slowBodies('no signature headers', () => ({}))
  await slowBodies('forged signature headers', forgedHeaders)
}
if (PARTS.has('ws')) await wsPartialFrames()
if (PARTS.has('disk')) await unsignedUploads()
if (PARTS.has('stalled')) await stalledUploads()
if (PARTS.has('lock')) await lockedDatabase()
if (PARTS.has('flood')) {
  await freshKeyFlood('open')
  proc.kill()
  await proc.exited
  // the same flood against a relay that admits only listed keys, then one that admits only existing agents
  for (const mode of ['allowlist', 'existing']) {
    const other = await startRelayBinary({ RELAY_ADMISSION: mode, RELAY_RATE_ADDRESS_PER_MIN: '600', RELAY_RATE_ADDRESS_EXEMPT: '' })
    ;[port, proc, dataDir] = [other.port, other.proc, other.dataDir]
    await freshKeyFlood(mode)
    proc.kill()
    await proc.exited
  }
}

proc.kill()
await proc.exited
