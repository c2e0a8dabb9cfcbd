/** Shared helpers for the benchmark scripts: native signing, running the binary, RSS, percentiles. */
import { spawn, spawnSync } from 'bun'
import { createPrivateKey, createPublicKey, randomBytes, sign as nativeSign } from 'node:crypto'
import { existsSync, mkdtempSync, readFileSync } from 'node:fs'
import { createServer } from 'node:net'
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
