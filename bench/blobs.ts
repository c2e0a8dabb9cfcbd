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
 * 4. the blob stores themselves, one run each: the directory store and the S3 store against a local
 *    s3rver (run by Node; `npm ci` installs it). Each store sits in a process of its own behind a bare
 *    HTTP server (no signing, no records): the file is POSTed to it over loopback (receive + place) and
 *    read back whole (GET). Peak RSS is that process's own, sampled every ~5 ms, above its idle figure.
 *    The S3 figures are mostly s3rver's (a Node process writing files on the same two cores), not a
 *    real store's. Goal (issue 13): a 100 MiB S3 upload holds no more than 64 MiB above idle.
 */
import { spawn, spawnSync } from 'bun'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { generateKeyPair, signRequest } from '../src/auth/sign.ts'
import { LocalBlobStore } from '../src/blobs/local/local-blob-store.ts'
import { s3StoreFromUrl } from '../src/blobs/s3/s3-blob-store.ts'
import { systemClock } from '../src/lib/clock.ts'
import type { BlobStore } from '../src/services/ports.ts'
import { startS3Server } from '../test/support/s3.ts'
import { QUICK, ensureBinary, fmt, rssMiB, startRelayBinary } from './lib.ts'

const SIZE = Number(process.env.BENCH_SIZE_MIB ?? (QUICK ? 20 : 100)) * 1024 * 1024
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? (QUICK ? 2 : 3))
const MB = 1e6

async function main(): Promise<void> {
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

    // the stores themselves, in processes of their own, on a file of the same size
    const source = makeSource(ROUNDS)
    const node = Bun.which('node')
    const s3 = node ? await startS3Server(node, 'relay-bench') : null
    try {
      console.log(`\nblob stores alone, each behind a bare HTTP server of its own, ${fmt(SIZE / 1024 / 1024, 0)} MiB, one run each (upload: receive + place; download: read)`)
      console.log('store                upload MB/s   download MB/s   peak RSS above idle up / down (MiB)')
      for (const kind of ['directory', 's3']) {
        if (kind === 's3' && !s3) {
          console.log('s3                   skipped: node is not installed (s3rver runs on Node)')
          continue
        }
        const r = await storeRun(kind, source, {
        BENCH_STORE_DIR: join(work, `store-${kind}`),
        ...(s3 ? { BENCH_S3_URL: s3.url('bench/'), ...(s3.env as Record<string, string>) } : {}),
      })
      console.log(`${kind.padEnd(20)} ${fmt(r.upMBps, 0).padStart(11)} ${fmt(r.downMBps, 0).padStart(15)}   ${fmt(r.upRssMiB, 1)} / ${fmt(r.downRssMiB, 1)}`)
    }
    console.log('goal: S3 upload peak RSS ≤ 64 MiB above idle')
    } finally {
      await s3?.stop()
    }
  } finally {
    relay.proc.kill('SIGTERM')
    await relay.proc.exited
    rmSync(work, { recursive: true, force: true })
  }
}

interface StoreFigures {
  upMBps: number
  downMBps: number
  upRssMiB: number
  downRssMiB: number
}

/** Starts a store process of `kind`, uploads `path` to it and reads it back; its figures. */
async function storeRun(kind: string, path: string, env: Record<string, string>): Promise<StoreFigures> {
  const child = spawn([process.execPath, import.meta.path, '--store-child', kind], { env: { ...process.env, ...env }, stdout: 'pipe', stderr: 'inherit' })
  try {
    const reader = child.stdout.getReader()
    const { value } = await reader.read()
    const { port } = JSON.parse(new TextDecoder().decode(value)) as { port: number }
    const base = `http://127.0.0.1:${port}`
    const call = async (method: string, route: string, body?: string | Blob) => {
      const res = await fetch(base + route, { method, body })
      if (!res.ok) throw new Error(`${kind} store: ${method} ${route} answered ${res.status}: ${await res.text()}`)
      return res
    }
    const readAll = async (res: Response) => {
      let n = 0
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) n += chunk.byteLength
      return n
    }
    // warm-up: a small blob each way, then the idle figure
    await readAll(await call('GET', `/blob/${await (await call('POST', '/blob', 'warm-up')).text()}`))
    await call('POST', '/mark')
    let t0 = performance.now()
    const hash = await (await call('POST', '/blob', Bun.file(path))).text()
    const upSeconds = (performance.now() - t0) / 1000
    const upRssMiB = Number(await (await call('GET', '/peak')).text())
    await call('POST', '/mark')
    t0 = performance.now()
    const n = await readAll(await call('GET', `/blob/${hash}`))
    const downSeconds = (performance.now() - t0) / 1000
    const downRssMiB = Number(await (await call('GET', '/peak')).text())
    const size = Bun.file(path).size
    if (n !== size) throw new Error(`${kind} store: read ${n} bytes, expected ${size}`)
    return { upMBps: size / MB / upSeconds, downMBps: size / MB / downSeconds, upRssMiB, downRssMiB }
  } finally {
    child.kill('SIGTERM')
    await child.exited
  }
}

/**
 * The store of `kind` behind a bare HTTP server on a free port (printed as a JSON line): POST /blob
 * receives and places the body, GET /blob/HASH reads it, POST /mark takes the idle RSS, GET /peak
 * answers the peak above it since (MiB).
 */
async function storeChild(kind: string): Promise<void> {
  const dir = process.env.BENCH_STORE_DIR as string
  const store: BlobStore =
    kind === 's3' ? s3StoreFromUrl(process.env.BENCH_S3_URL as string, process.env, systemClock) : new LocalBlobStore(join(dir, 'blobs'), join(dir, 'tmp'))
  let idle = process.memoryUsage.rss()
  let peak = idle
  setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 5)
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    maxRequestBodySize: 2 ** 40,
    async fetch(req) {
      const url = new URL(req.url)
      if (req.method === 'POST' && url.pathname === '/blob') {
        const length = req.headers.get('content-length')
        const staged = await store.receive(req.body, { maxBytes: 2 ** 40, declaredBytes: length === null ? null : Number(length) })
        await store.place(staged)
        return new Response(staged.hashHex)
      }
      if (req.method === 'GET' && url.pathname.startsWith('/blob/')) return new Response(await store.read(url.pathname.slice(6)))
      if (req.method === 'POST' && url.pathname === '/mark') {
        Bun.gc(true)
        await Bun.sleep(200)
        idle = peak = process.memoryUsage.rss()
        return new Response('ok')
      }
      if (url.pathname === '/peak') return new Response(String((Math.max(peak, process.memoryUsage.rss()) - idle) / 1024 / 1024))
      return new Response('no such route', { status: 404 })
    },
  })
  console.log(JSON.stringify({ port: server.port }))
}

// `bun bench/blobs.ts --store-child KIND` (started by the main run below): one store behind a bare HTTP server
if (process.argv[2] === '--store-child') {
  await storeChild(process.argv[3])
} else {
  await main()
}
