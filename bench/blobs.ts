/**
 * Blob benchmark: prints figures, asserts nothing.
 *
 *   bun bench/blobs.ts                        # 100 MiB blob, 3 rounds (builds dist/relay first)
 *   BENCH_QUICK=1 bun bench/blobs.ts          # 20 MiB, 2 rounds: a few seconds
 *   BENCH_NO_BUILD=1 bun bench/blobs.ts       # reuse an existing dist/relay
 * (from the repository root, with node_modules/.bin on PATH; BENCH_SIZE_MIB and BENCH_ROUNDS override)
 *
 * Against the compiled binary over loopback HTTP, one transfer at a time:
 * 1. upload: POST /v1/blobs of a file (streamed from disk by the client; its SHA-256 for the signature
 *    is computed before the clock starts). The relay streams to a temp file while hashing, fdatasyncs
 *    and renames it. Each round uploads different content, so every round stores a new file.
 * 2. download: GET /v1/blobs/{id}, the body read and discarded by the client.
 * During each transfer the relay's resident memory is sampled from /proc/<pid>/status every ~10 ms;
 * the table shows the peak above the relay's idle RSS (measured after a warm-up transfer).
 * 3. baseline, the same bytes on the same disk: `cp` of the file (and `cp` + `sync FILE`, since the
 *    relay flushes every upload), and `cat FILE > /dev/null` (from the page cache, like the download).
 * Goals (issue 5): ≥ 300 MB/s both ways; peak RSS no more than 16 MiB above idle.
 */
import { spawnSync } from 'bun'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { generateKeyPair, signRequest } from '../src/auth/sign.ts'
import { QUICK, ensureBinary, fmt, rssMiB, startRelayBinary } from './lib.ts'

const SIZE = Number(process.env.BENCH_SIZE_MIB ?? (QUICK ? 20 : 100)) * 1024 * 1024
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? (QUICK ? 2 : 3))
const MB = 1e6

ensureBinary()
const work = mkdtempSync(join(tmpdir(), 'relay-bench-blobs-'))
const relay = await startRelayBinary({ RELAY_BLOB_QUOTA: `${Math.ceil((SIZE * (ROUNDS + 2)) / 1024 / 1024) + 16}MiB` }, join(work, 'data'))
const keys = generateKeyPair()

/** A file of SIZE bytes whose first 8 bytes make it distinct per round. */
function makeSource(round: number): string {
  const path = join(work, `source-${round}.bin`)
  const block = new Uint8Array(1024 * 1024)
  crypto.getRandomValues(block.subarray(0, 65536))
  for (let i = 65536; i < block.length; i += 65536) block.set(block.subarray(0, 65536), i)
  new DataView(block.buffer).setFloat64(0, round + Math.random())
  const file = Bun.file(path).writer()
  for (let written = 0; written < SIZE; written += block.length) file.write(block.subarray(0, Math.min(block.length, SIZE - written)))
  file.end()
  return path
}

async function sha256(path: string): Promise<{ b64: string; hex: string }> {
  const h = new Bun.CryptoHasher('sha256')
  for await (const chunk of Bun.file(path).stream() as unknown as AsyncIterable<Uint8Array>) h.update(chunk)
  const d = h.digest()
  return { b64: d.toString('base64url'), hex: d.toString('hex') }
}

/** Samples the relay's RSS every ~10 ms while `run` goes; returns its result, seconds and the peak. */
async function sampled<T>(run: () => Promise<T>): Promise<{ value: T; seconds: number; peakMiB: number }> {
  let peak = rssMiB(relay.proc.pid)
  const timer = setInterval(() => (peak = Math.max(peak, rssMiB(relay.proc.pid))), 10)
  const t0 = performance.now()
  try {
    const value = await run()
    return { value, seconds: (performance.now() - t0) / 1000, peakMiB: Math.max(peak, rssMiB(relay.proc.pid)) }
  } finally {
    clearInterval(timer)
  }
}

async function upload(path: string, hash: { b64: string }): Promise<string> {
  const headers = {
    ...signRequest(keys, 'POST', '/v1/blobs', undefined, new Date().toISOString(), hash.b64),
    'content-type': 'application/octet-stream',
  }
  const res = await fetch(`${relay.url}/v1/blobs`, { method: 'POST', headers, body: Bun.file(path) })
  const body = (await res.json()) as { blob_id: string }
  if (res.status !== 201) throw new Error(`upload answered ${res.status}: ${JSON.stringify(body)}`)
  return body.blob_id
}

async function download(blobId: string, expected = SIZE): Promise<number> {
  const path = `/v1/blobs/${blobId}`
  const res = await fetch(relay.url + path, { headers: { ...signRequest(keys, 'GET', path, undefined, new Date().toISOString()) } })
  if (res.status !== 200) throw new Error(`download answered ${res.status}: ${await res.text()}`)
  let n = 0
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) n += chunk.byteLength
  if (n !== expected) throw new Error(`downloaded ${n} bytes, expected ${expected}`)
  return n
}

function timedShell(cmd: string): number {
  const t0 = performance.now()
  const r = spawnSync(['sh', '-c', cmd])
  if (r.exitCode !== 0) throw new Error(`${cmd}: ${r.stderr.toString()}`)
  return (performance.now() - t0) / 1000
}

const rows: { what: string; mbps: number[]; rssAbove?: number[] }[] = []
const row = (what: string) => {
  const r = { what, mbps: [] as number[], rssAbove: [] as number[] }
  rows.push(r)
  return r
}

try {
  // warm-up: one small transfer each way, then the idle figure
  const warm = join(work, 'warm.bin')
  writeFileSync(warm, crypto.getRandomValues(new Uint8Array(65536)))
  await download(await upload(warm, await sha256(warm)), 65536)
  await Bun.sleep(200)
  const idle = rssMiB(relay.proc.pid)

  const up = row('upload (relay)')
  const down = row('download (relay)')
  const cp = row('cp')
  const cpSync = row('cp + sync')
  const cat = row('cat > /dev/null')
  for (let round = 0; round < ROUNDS; round++) {
    const source = makeSource(round)
    const hash = await sha256(source) // also brings the file into the page cache, as for cp
    const u = await sampled(() => upload(source, hash))
    up.mbps.push(SIZE / MB / u.seconds)
    up.rssAbove.push(u.peakMiB - idle)
    const d = await sampled(() => download(u.value))
    down.mbps.push(SIZE / MB / d.seconds)
    down.rssAbove.push(d.peakMiB - idle)
    const copy = join(work, `copy-${round}.bin`)
    cp.mbps.push(SIZE / MB / timedShell(`cp '${source}' '${copy}'`))
    rmSync(copy)
    cpSync.mbps.push(SIZE / MB / timedShell(`cp '${source}' '${copy}' && sync '${copy}'`))
    cat.mbps.push(SIZE / MB / timedShell(`cat '${copy}' > /dev/null`))
    rmSync(copy)
    rmSync(source)
  }

  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
  console.log(`blob ${fmt(SIZE / 1024 / 1024, 0)} MiB, ${ROUNDS} rounds, relay idle RSS ${fmt(idle, 1)} MiB (binary, loopback, one transfer at a time)`)
  console.log('what                 median MB/s   best MB/s   peak RSS above idle (MiB, max of rounds)')
  for (const r of rows) {
    const rss = r.rssAbove?.length ? fmt(Math.max(...r.rssAbove), 1) : '-'
    console.log(`${r.what.padEnd(20)} ${fmt(median(r.mbps), 0).padStart(11)} ${fmt(Math.max(...r.mbps), 0).padStart(11)}   ${rss}`)
  }
  console.log('goals: ≥ 300 MB/s both ways; peak RSS ≤ 16 MiB above idle')
} finally {
  relay.proc.kill('SIGTERM')
  await relay.proc.exited
  rmSync(work, { recursive: true, force: true })
}
