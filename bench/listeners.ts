/**
 * Many listeners: prints figures, asserts nothing.
 *
 *   bun bench/listeners.ts [BINARY]                       # 10,000 listeners against dist/relay (or BINARY)
 *   BENCH_LISTENERS=100000 bun bench/listeners.ts BINARY  # the full size
 *   bun bench/listeners.ts floor                          # part 1 against a bare Bun.serve WebSocket server
 * (from the repository root, with node_modules/.bin on PATH; as root, or with a hard descriptor limit
 * above the number of listeners, since the limits are raised with `prlimit` on every process)
 *
 * Copy the binary somewhere of its own (`npm run build && cp dist/relay /tmp/relay`) so that a build
 * meanwhile does not replace it. The relay runs on a temporary data directory with rate limits off and
 * the pre-authentication caps widened for the bench: RELAY_WS_PREAUTH_MAX=2048 (unauthenticated sockets
 * relay-wide, default 128), RELAY_WS_PREAUTH_PER_ADDRESS=0 (default 4; loopback is exempt anyway),
 * RELAY_PREAUTH_MEMORY=64MiB (default 40MiB). Handshakes refused by those caps (429/503) are retried,
 * as a real client does.
 *
 * BENCH_LISTENERS agents (10,000), each its own key, hold one authenticated WebSocket each. The client
 * side is BENCH_CLIENTS processes (4) speaking the WebSocket protocol over raw sockets (a few hundred
 * bytes per socket), bound to local addresses 127.0.0.2–127.0.0.201 so that no address runs out of ports.
 *
 * 1. Connect: time until every socket is open and authenticated (BENCH_INFLIGHT handshakes in flight per
 *    client process, 128); relay RSS before and after, and KiB per socket. Goal: 100,000 ≤ 1 GiB (10 KiB each).
 * 2. Latency: signed POST /v1/messages at BENCH_RATE/s (1,000) for BENCH_SECONDS (10) to random listeners,
 *    while all are connected; send → push p50/p99 (from just before the POST to the frame's arrival in a
 *    client process; both sides read the same clock). Goal: p50 ≤ 1 ms, p99 ≤ 5 ms.
 * 3. Reconnect storm: the relay is stopped (SIGTERM: every socket gets 1001) and started again on the same
 *    port and data; every client reconnects with jittered backoff (100 ms doubling to 2 s) until it is
 *    authenticated again or BENCH_STORM_LIMIT seconds (120) pass. Time from the restarted relay being
 *    ready until all are back, handshakes refused meanwhile (429/503, retried) and sockets never back.
 *    Goal: all back within a minute.
 */
import { spawn, spawnSync, type Subprocess } from 'bun'
import { createHash, createPrivateKey, createPublicKey, sign as nativeSign } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { BINARY, benchSize, fmt, freePort, nativeAgent, percentile, rssMiB } from './lib.ts'

const LISTENERS = benchSize('BENCH_LISTENERS', 10_000, 1_000)
const CLIENTS = benchSize('BENCH_CLIENTS', 4, 2)
const INFLIGHT = benchSize('BENCH_INFLIGHT', 128, 64)
const RATE = benchSize('BENCH_RATE', 1000, 1000)
const SECONDS = benchSize('BENCH_SECONDS', 10, 3)
const STORM_LIMIT = benchSize('BENCH_STORM_LIMIT', 120, 60)
const FD_LIMIT = Math.max(65_536, LISTENERS + 10_000)
// the client side is spread over BENCH_CLIENTS processes, each under its own descriptor limit

/** Wall-clock milliseconds with sub-millisecond precision, comparable across processes. */
const wallNow = () => performance.timeOrigin + performance.now()

const PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex')
/** The key of listener i, the same in every process. */
function listenerKey(i: number) {
  const seed = createHash('sha256').update(`listener-bench-${i}`).digest()
  const key = createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, seed]), format: 'der', type: 'pkcs8' })
  return { key, publicKey: createPublicKey(key).export({ format: 'jwk' }).x as string }
}

/** Raises a process's descriptor limit to FD_LIMIT (needs CAP_SYS_RESOURCE), else to its hard limit; returns it. */
/** RSS split into anonymous memory (heaps, buffers) and file-backed pages (the binary, the memory-mapped database), MiB. */
function rssParts(pid: number) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const kb = (name: string) => Number(new RegExp(`${name}:\\s+(\\d+) kB`).exec(status)?.[1] ?? NaN) / 1024
  return { total: kb('VmRSS'), anon: kb('RssAnon'), file: kb('RssFile') + kb('RssShmem') }
}
const perSocket = (a: ReturnType<typeof rssParts>, b: ReturnType<typeof rssParts>, n: number) =>
  `${fmt(((b.total - a.total) * 1024) / n, 2)} KiB per socket (anonymous ${fmt(((b.anon - a.anon) * 1024) / n, 2)}, file-backed ${fmt(((b.file - a.file) * 1024) / n, 2)})`

function raiseFdLimit(pid: number): number {
  if (spawnSync(['prlimit', `--pid=${pid}`, `--nofile=${FD_LIMIT}:${FD_LIMIT}`]).exitCode === 0) return FD_LIMIT
  const hard = /(\d+)\s*$/.exec(spawnSync(['prlimit', `--pid=${pid}`, '--nofile', '--raw', '--noheadings', '-o', 'HARD']).stdout.toString().trim())
  const n = hard ? Number(hard[1]) : 1024
  spawnSync(['prlimit', `--pid=${pid}`, `--nofile=${n}:${n}`])
  return n
}

// ---------------------------------------------------------------- client process

type Phase = 'handshake' | 'auth' | 'open'
interface SockState {
  i: number
  phase: Phase
  buf: Buffer | null
  closedByUs: boolean
}

async function client() {
  const index = Number(process.env.LB_INDEX)
  const port = Number(process.env.LB_PORT)
  const from = Math.floor((LISTENERS * index) / CLIENTS)
  const to = Math.floor((LISTENERS * (index + 1)) / CLIENTS)
  const keys = new Map<number, ReturnType<typeof listenerKey>>()
  for (let i = from; i < to; i++) keys.set(i, listenerKey(i))
  const mask = Buffer.from([1, 2, 3, 4])

  let authenticated = 0
  let refused = 0
  let errors = 0
  let inflight = 0
  let reconnecting = false
  const queue: number[] = []
  const backoff = new Map<number, number>()
  let pushes: number[] = [] // pairs: seq, arrival
  const send = (m: unknown) => process.send?.(m)

  const frame = (opcode: number, payload: Buffer) => {
    const n = payload.length
    const head = n < 126 ? Buffer.from([0x80 | opcode, 0x80 | n]) : Buffer.from([0x80 | opcode, 0x80 | 126, n >> 8, n & 255])
    const body = Buffer.allocUnsafe(n)
    for (let k = 0; k < n; k++) body[k] = payload[k] ^ mask[k & 3]
    return Buffer.concat([head, mask, body])
  }

  const authFrame = (i: number) => {
    const k = keys.get(i)!
    const timestamp = new Date().toISOString()
    const signature = nativeSign(null, Buffer.from(`WS\n${timestamp}`), k.key).toString('base64url')
    return frame(1, Buffer.from(JSON.stringify({ type: 'auth', public_key: k.publicKey, timestamp, signature })))
  }

  const retryLater = (i: number) => {
    const d = Math.min(2000, (backoff.get(i) ?? 50) * 2)
    backoff.set(i, d)
    setTimeout(() => enqueue(i), d / 2 + Math.random() * (d / 2))
  }

  const onText = (s: Bun.Socket<SockState>, text: string) => {
    const st = s.data
    if (st.phase === 'auth') {
      if (text.startsWith('{"type":"auth_result"') && text.includes('"ok"')) {
        st.phase = 'open'
        authenticated++
        backoff.delete(st.i)
        inflight--
        pump()
      }
      return
    }
    const m = /"seq":(\d+)/.exec(text)
    if (m) pushes.push(Number(m[1]), wallNow())
  }

  const onData = (s: Bun.Socket<SockState>, chunk: Buffer) => {
    const st = s.data
    let buf = st.buf ? Buffer.concat([st.buf, chunk]) : chunk
    st.buf = null
    if (st.phase === 'handshake') {
      const end = buf.indexOf('\r\n\r\n')
      if (end < 0) return void (st.buf = Buffer.from(buf))
      if (!buf.subarray(0, 13).toString().startsWith('HTTP/1.1 101')) {
        refused++
        st.closedByUs = true
        s.end()
        inflight--
        retryLater(st.i)
        pump()
        return
      }
      buf = buf.subarray(end + 4)
      st.phase = 'auth'
      s.write(authFrame(st.i))
    }
    let off = 0
    while (buf.length - off >= 2) {
      const opcode = buf[off] & 15
      let len = buf[off + 1] & 127
      let head = 2
      if (len === 126) {
        if (buf.length - off < 4) break
        len = buf.readUInt16BE(off + 2)
        head = 4
      } else if (len === 127) {
        if (buf.length - off < 10) break
        len = Number(buf.readBigUInt64BE(off + 2))
        head = 10
      }
      if (buf.length - off < head + len) break
      const payload = buf.subarray(off + head, off + head + len)
      off += head + len
      if (opcode === 1) onText(s, payload.toString())
      else if (opcode === 9) s.write(frame(10, Buffer.from(payload)))
      else if (opcode === 8) {
        st.closedByUs = false
        s.end()
        return
      }
    }
    if (off < buf.length) st.buf = Buffer.from(buf.subarray(off))
  }

  const connect = (i: number) => {
    inflight++
    // Bun.connect binds the local address when given one (not in its types)
    const options = {
      hostname: '127.0.0.1',
      port,
      localAddress: `127.0.0.${2 + (i % 200)}`,
      data: { i, phase: 'handshake', buf: null, closedByUs: false },
      socket: {
        open(s: Bun.Socket<SockState>) {
          s.write(`GET /v1/ws HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`)
        },
        data: onData,
        close(s: Bun.Socket<SockState>) {
          const st = s.data
          if (st.closedByUs) return
          if (st.phase === 'open') authenticated--
          else inflight--
          st.phase = 'handshake'
          if (reconnecting) retryLater(st.i)
          else errors++
          pump()
        },
        error() {},
      },
    }
    Bun.connect<SockState>(options as Bun.TCPSocketConnectOptions<SockState>).catch(() => {
      inflight--
      errors++
      if (reconnecting) retryLater(i)
      pump()
    })
  }

  function enqueue(i: number) {
    queue.push(i)
    pump()
  }
  function pump() {
    while (inflight < INFLIGHT && queue.length > 0) connect(queue.shift()!)
  }

  setInterval(() => {
    send({ authenticated, refused, errors, pushes, rss: rssMiB(process.pid) })
    pushes = []
  }, 100)
  process.on('message', (m: { cmd: string }) => {
    if (m.cmd === 'connect') for (let i = from; i < to; i++) enqueue(i)
    if (m.cmd === 'storm') {
      reconnecting = true
      refused = 0
      errors = 0
    }
  })
}

// ---------------------------------------------------------------- coordinator

interface ClientReport {
  authenticated: number
  refused: number
  errors: number
  pushes: number[]
  rss: number
}

async function startRelay(binary: string, port: number, dataDir: string) {
  const argv = binary === 'floor' ? [process.execPath, import.meta.path, '--floor-server', String(port)] : [binary, 'serve', '--port', String(port), '--data-dir', dataDir]
  const proc = spawn(argv, {
    env: {
      PATH: process.env.PATH ?? '',
      RELAY_LOG_LEVEL: 'warn',
      RELAY_RATE_SEND_PER_MIN: '0',
      RELAY_RATE_POLL_PER_MIN: '0',
      RELAY_RATE_ADDRESS_PER_MIN: '0',
      RELAY_RATE_NEW_AGENTS_PER_HOUR: '0',
      RELAY_WS_PREAUTH_MAX: '2048',
      RELAY_WS_PREAUTH_PER_ADDRESS: '0',
      RELAY_PREAUTH_MEMORY: '64MiB',
    },
    stdout: 'ignore',
    stderr: 'inherit',
  })
  const fds = raiseFdLimit(proc.pid)
  if (fds < LISTENERS + 100) console.log(`warning: the relay may open only ${fds} descriptors (hard limit; raising it needs CAP_SYS_RESOURCE), fewer than ${LISTENERS} listeners need`)
  const url = `http://127.0.0.1:${port}`
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`${url}/v1/health/ready`)).status === 200) break
    } catch {}
    if (i > 6000) throw new Error('relay not ready')
    await Bun.sleep(5)
  }
  return { proc, url }
}

async function main() {
  const binary = process.argv[2] ?? BINARY
  const port = await freePort()
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-bench-listeners-'))
  const reports: ClientReport[] = Array.from({ length: CLIENTS }, () => ({ authenticated: 0, refused: 0, errors: 0, pushes: [], rss: 0 }))
  const arrivals = new Map<number, number>()
  const clients: Subprocess[] = []
  let relay = await startRelay(binary, port, dataDir)
  try {
    for (let c = 0; c < CLIENTS; c++) {
      const p = spawn([process.execPath, import.meta.path, '--client'], {
        env: { ...process.env, LB_INDEX: String(c), LB_PORT: String(port) },
        stdout: 'inherit',
        stderr: 'inherit',
        ipc(m: ClientReport) {
          reports[c] = m
          for (let k = 0; k < m.pushes.length; k += 2) arrivals.set(m.pushes[k], m.pushes[k + 1])
        },
      })
      raiseFdLimit(p.pid)
      clients.push(p)
    }
    const total = () => reports.reduce((n, r) => n + r.authenticated, 0)
    await Bun.sleep(300)
    const rss0 = rssMiB(relay.proc.pid)
    const parts0 = rssParts(relay.proc.pid)
    console.log(`relay ${binary}; ${LISTENERS} listeners from ${CLIENTS} client processes; descriptor limit ${raiseFdLimit(relay.proc.pid)} for the relay; load average ${loadavg().map((n) => n.toFixed(1)).join(' ')}`)

    // 1. connect
    const t0 = performance.now()
    for (const p of clients) p.send({ cmd: 'connect' })
    while (total() < LISTENERS && performance.now() - t0 < 600_000) await Bun.sleep(20)
    const connectS = (performance.now() - t0) / 1000
    await Bun.sleep(2000)
    const rss1 = rssMiB(relay.proc.pid)
    const parts1 = rssParts(relay.proc.pid)
    const details = (await (await fetch(`${relay.url}/v1/health/details`)).json()) as any
    const refused = reports.reduce((n, r) => n + r.refused, 0)
    console.log(`\n1. ${total()} of ${LISTENERS} authenticated in ${fmt(connectS, 1)} s (${fmt(total() / connectS, 0)}/s; ${refused} handshakes refused by the pre-auth caps and retried); relay reports ${details.components?.websocket?.authenticated}`)
    console.log(`   relay RSS ${fmt(rss0, 1)} MiB idle → ${fmt(rss1, 1)} MiB: ${fmt(((rss1 - rss0) * 1024) / LISTENERS, 2)} KiB per socket (${fmt((rss1 * 1024) / LISTENERS, 2)} KiB counting the idle relay)   (goal ≤ 10 KiB)`)
    console.log(`   that is ${perSocket(parts0, parts1, LISTENERS)}; the agents were new, so their rows and replay entries are in it too`)
    console.log(`   client processes RSS ${reports.map((r) => fmt(r.rss, 0)).join(' + ')} MiB`)

    if (binary === 'floor') return
    // 2. latency
    const senders = Array.from({ length: 10 }, () => nativeAgent())
    const sends = RATE * SECONDS
    const timestamp = new Date().toISOString()
    const requests = Array.from({ length: sends }, (_, i) => {
      const recipient = listenerKey(Math.floor(Math.random() * LISTENERS)).publicKey
      const body = JSON.stringify({ recipient_key: recipient, body: { seq: i } })
      return { body, headers: { ...senders[i % 10].sign('POST', '/v1/messages', timestamp, body), 'content-type': 'application/json' } }
    })
    await Promise.all(Array.from({ length: 20 }, () => fetch(`${relay.url}/v1/health`).then((r) => r.arrayBuffer())))
    const issuedAt = new Float64Array(sends)
    const statuses = new Map<number, number>()
    const inFlight: Promise<void>[] = []
    const l0 = performance.now()
    let next = 0
    while (next < sends) {
      const due = Math.min(sends, Math.floor(((performance.now() - l0) * RATE) / 1000) + 1)
      for (; next < due; next++) {
        const r = requests[next]
        issuedAt[next] = wallNow()
        inFlight.push(
          fetch(`${relay.url}/v1/messages`, { method: 'POST', headers: r.headers, body: r.body }).then(async (res) => {
            await res.arrayBuffer()
            statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1)
          }),
        )
      }
      await Bun.sleep(1)
    }
    await Promise.all(inFlight)
    const achieved = sends / ((performance.now() - l0) / 1000)
    for (let i = 0; i < 300 && arrivals.size < sends; i++) await Bun.sleep(10)
    const latencies = [...arrivals].map(([seq, at]) => at - issuedAt[seq]).sort((a, b) => a - b)
    console.log(`\n2. ${sends} sends at ${RATE}/s (achieved ${fmt(achieved, 0)}/s) to random listeners of ${total()}; statuses ${JSON.stringify(Object.fromEntries(statuses))}; pushes received ${latencies.length}`)
    console.log(`   send → push p50 ${fmt(percentile(latencies, 50))} ms  p99 ${fmt(percentile(latencies, 99))} ms  max ${fmt(latencies.at(-1) ?? NaN)} ms   (goal p50 ≤ 1, p99 ≤ 5)`)

    // 3. reconnect storm
    for (const p of clients) p.send({ cmd: 'storm' })
    await Bun.sleep(200)
    relay.proc.kill('SIGTERM')
    await relay.proc.exited
    const down = performance.now()
    relay = await startRelay(binary, port, dataDir)
    const ready = performance.now()
    const partsReady = rssParts(relay.proc.pid)
    let allBackAt = NaN
    while (performance.now() - ready < STORM_LIMIT * 1000) {
      if (total() >= LISTENERS) {
        allBackAt = performance.now()
        break
      }
      await Bun.sleep(20)
    }
    await Bun.sleep(2000)
    const partsBack = rssParts(relay.proc.pid)
    const stormRefused = reports.reduce((n, r) => n + r.refused, 0)
    const stormErrors = reports.reduce((n, r) => n + r.errors, 0)
    console.log(`\n3. reconnect storm: relay stopped and started again in ${fmt((ready - down) / 1000, 2)} s; ${total()} of ${LISTENERS} back ${Number.isNaN(allBackAt) ? `NOT all within ${STORM_LIMIT} s` : `in ${fmt((allBackAt - ready) / 1000, 1)} s after ready`}`)
    console.log(`   handshakes refused meanwhile (429/503, retried) ${stormRefused}; connection errors (retried) ${stormErrors}; never back ${LISTENERS - total()}   (goal: all within 60 s)`)
    console.log(`   relay RSS ${fmt(partsReady.total, 1)} MiB when ready → ${fmt(partsBack.total, 1)} MiB with all back (agents known now): ${perSocket(partsReady, partsBack, LISTENERS)}`)
  } finally {
    for (const p of clients) p.kill()
    relay.proc.kill('SIGTERM')
    await relay.proc.exited
    rmSync(dataDir, { recursive: true, force: true })
  }
}

/**
 * The floor: a bare Bun.serve WebSocket server that answers any first frame with an ok auth_result and
 * keeps nothing per socket but what the runtime does; what the runtime alone costs per socket.
 */
function floorServer(port: number) {
  const server = Bun.serve({
    hostname: '127.0.0.1',
    port,
    fetch(req, srv) {
      if (new URL(req.url).pathname === '/v1/health/ready') return new Response('ok')
      if (new URL(req.url).pathname === '/v1/health/details') return Response.json({ components: { websocket: { authenticated: srv.pendingWebSockets } } })
      return srv.upgrade(req) ? undefined : new Response('no', { status: 400 })
    },
    websocket: { idleTimeout: 0, sendPings: false, perMessageDeflate: false, message: (ws) => void ws.send('{"type":"auth_result","status":"ok"}') },
  })
  process.on('SIGTERM', () => {
    server.stop(true)
    process.exit(0)
  })
}

if (process.argv.includes('--client')) await client()
else if (process.argv.includes('--floor-server')) floorServer(Number(process.argv[process.argv.indexOf('--floor-server') + 1]))
else {
  await main()
  process.exit(0)
}
