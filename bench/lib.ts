/** Shared helpers for the benchmark scripts: native signing, running the binary, RSS, percentiles. */
import { spawn, spawnSync } from 'bun'
import { createPrivateKey, createPublicKey, randomBytes, sign as nativeSign } from 'node:crypto'
import { existsSync, mkdtempSync, readFileSync } from 'node:fs'
import { connect, createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { bodyHash, canonicalString } from '../src/auth/canonical.ts'
import type { KeyPair } from '../src/auth/sign.ts'

export const ROOT = resolve(import.meta.dir, '..')
/** The relay under test: dist/relay, or RELAY_BINARY (e.g. an older build to compare against). */
export const BINARY = process.env.RELAY_BINARY ?? join(ROOT, 'dist', 'relay')

/** Builds dist/relay unless BENCH_NO_BUILD=1 (or RELAY_BINARY is given) and it exists. */
export function ensureBinary(): string {
  if ((process.env.BENCH_NO_BUILD === '1' || process.env.RELAY_BINARY) && existsSync(BINARY)) return BINARY
  const r = spawnSync([process.execPath, 'build', '--compile', '--minify', '--sourcemap', '--bytecode', join(ROOT, 'src/main.ts'), '--outfile', BINARY], { cwd: ROOT })
  if (r.exitCode !== 0) throw new Error(r.stderr.toString())
  return BINARY
}

const PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex')

/**
 * A key pair on the runtime's native signer, fast enough to pre-sign tens of thousands of requests
 * (the relay's client uses the portable @noble/curves). `sign` gives the three request headers,
 * `signText` a signature of any text (e.g. a WebSocket auth frame).
 */
export function nativeAgent(seed: Uint8Array = randomBytes(32)) {
  const key = createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, seed]), format: 'der', type: 'pkcs8' })
  const keys: KeyPair = { seed, publicKey: createPublicKey(key).export({ format: 'jwk' }).x as string }
  const signText = (text: string) => nativeSign(null, Buffer.from(text), key).toString('base64url')
  const sign = (method: string, pathWithQuery: string, timestamp: string, body?: string | Uint8Array) => ({
    'X-M2M-Public-Key': keys.publicKey,
    'X-M2M-Timestamp': timestamp,
    'X-M2M-Signature': signText(canonicalString(method, pathWithQuery, timestamp, bodyHash(body))),
  })
  return { keys, sign, signText }
}

export function makeAgents(n: number) {
  return Array.from({ length: n }, () => nativeAgent())
}

export async function freePort(): Promise<number> {
  return new Promise((res) => {
    const s = createServer()
    s.listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port
      s.close(() => res(p))
    })
  })
}

export async function startRelayBinary(env: Record<string, string> = {}, dataDir = mkdtempSync(join(tmpdir(), 'relay-bench-')), binary = BINARY) {
  const port = await freePort()
  const t0 = performance.now()
  const proc = spawn([binary, 'serve', '--port', String(port), '--data-dir', dataDir], {
    // one load generator on loopback is one client address: the per-address limit would cap every figure
    env: { PATH: process.env.PATH ?? '', RELAY_LOG_LEVEL: 'warn', RELAY_RATE_ADDRESS_PER_MIN: '0', ...env },
    stdout: 'ignore',
    stderr: 'inherit',
  })
  const url = `http://127.0.0.1:${port}`
  for (;;) {
    try {
      if ((await fetch(`${url}/v1/health/ready`)).status === 200) break
    } catch {}
    if (performance.now() - t0 > 15_000) throw new Error('relay not ready')
    await Bun.sleep(1)
  }
  return { proc, url, port, dataDir, readyMs: performance.now() - t0 }
}

/** Resident set size of a process in MiB, from /proc. */
export function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return m ? Number(m[1]) / 1024 : NaN
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]
}

/** Runs `total` requests with `concurrency` workers; returns elapsed ms and sorted latencies. */
export async function runLoad(total: number, concurrency: number, makeRequest: (i: number) => Promise<Response>) {
  const latencies: number[] = new Array(total)
  let next = 0
  const statuses = new Map<number, number>()
  const t0 = performance.now()
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (;;) {
        const i = next++
        if (i >= total) return
        const s = performance.now()
        const res = await makeRequest(i)
        await res.arrayBuffer()
        latencies[i] = performance.now() - s
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1)
      }
    }),
  )
  const elapsed = performance.now() - t0
  latencies.sort((a, b) => a - b)
  return { elapsed, latencies, statuses: Object.fromEntries(statuses), perSecond: (total / elapsed) * 1000 }
}

export const fmt = (n: number, digits = 2) => n.toFixed(digits)

/** BENCH_QUICK=1 runs a script at small sizes. */
export const QUICK = process.env.BENCH_QUICK === '1'

/** A size from the environment, else the full or quick default. */
export const benchSize = (name: string, full: number, small: number): number => Number(process.env[name] ?? (QUICK ? small : full))

/**
 * Opens one WebSocket at `url` (ws://…/v1/ws) and authenticates it as `agent`; resolves once the relay
 * said ok. A handshake refused for the relay's pre-authentication budget (each unauthenticated socket
 * holds room for one unfinished frame) is tried again shortly, as the client library's listen loop does.
 */
export async function openAgentSocket(url: string, agent: ReturnType<typeof nativeAgent>, onMessage?: (data: string) => void, attempts = 50): Promise<WebSocket> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await openAgentSocketOnce(url, agent, onMessage)
    } catch (err) {
      if (attempt >= attempts) throw err
      await Bun.sleep(20 + Math.random() * 80)
    }
  }
}

function openAgentSocketOnce(url: string, agent: ReturnType<typeof nativeAgent>, onMessage?: (data: string) => void): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url)
    const timestamp = new Date().toISOString()
    ws.onopen = () => ws.send(JSON.stringify({ type: 'auth', public_key: agent.keys.publicKey, timestamp, signature: agent.signText(`WS\n${timestamp}`) }))
    ws.onerror = () => reject(new Error('socket error'))
    ws.onmessage = (e) => {
      const text = String(e.data)
      if (!text.startsWith('{"type":"auth_result"')) return
      if (!text.includes('"ok"')) return reject(new Error(text))
      ws.onmessage = onMessage ? (m) => onMessage(String(m.data)) : null
      resolve(ws)
    }
  })
}

export interface RawAnswer {
  status: number
  ms: number
  body: string
}

/** One HTTP/1.1 request on a fresh connection from `localAddress`; resolves once the answer is complete. */
export function rawRequest(port: number, localAddress: string, method: string, path: string, headers: Record<string, string>, body: Uint8Array | string = ''): Promise<RawAnswer> {
  return new Promise((resolve) => {
    const t0 = performance.now()
    const bytes = typeof body === 'string' ? Buffer.from(body) : Buffer.from(body.buffer, body.byteOffset, body.byteLength)
    const s = connect({ host: '127.0.0.1', port, localAddress })
    let got: Buffer = Buffer.alloc(0)
    let settled = false
    const head = [`${method} ${path} HTTP/1.1`, 'Host: 127.0.0.1', `Content-Length: ${bytes.length}`, ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)].join('\r\n')
    const finish = () => {
      if (settled) return
      settled = true
      const text = got.toString('latin1')
      const end = text.indexOf('\r\n\r\n')
      resolve({ status: Number(/^HTTP\/1\.1 (\d+)/.exec(text)?.[1] ?? 0), ms: performance.now() - t0, body: end < 0 ? '' : text.slice(end + 4) })
      s.destroy()
    }
    s.on('connect', () => s.write(Buffer.concat([Buffer.from(head + '\r\n\r\n'), bytes])))
    s.on('data', (d) => {
      got = Buffer.concat([got, d as Buffer])
      const text = got.toString('latin1')
      const end = text.indexOf('\r\n\r\n')
      if (end < 0) return
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(text.slice(0, end))?.[1] ?? 0)
      if (got.length >= end + 4 + length) finish()
    })
    s.on('close', finish)
    s.on('error', () => {})
  })
}

/**
 * A /proc stat file (of a process or a thread): its command name and its CPU time in ms (user + system,
 * clock ticks of 10 ms); null when it is gone. Linux only.
 */
export function procCpu(statPath: string): { name: string; ms: number } | null {
  let stat: string
  try {
    stat = readFileSync(statPath, 'utf8')
  } catch {
    return null // ended meanwhile
  }
  const end = stat.lastIndexOf(')')
  const f = stat.slice(end + 2).split(' ')
  return { name: stat.slice(stat.indexOf('(') + 1, end), ms: (Number(f[11]) + Number(f[12])) * 10 }
}
