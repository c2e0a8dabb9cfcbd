/**
 * Memory of blob uploads with a forged signature: N concurrent 100 MiB uploads stream into the compiled
 * relay while its RSS is sampled every 50 ms. Every upload is answered 401 once its bytes are hashed
 * (the signature covers the hash); what matters is what the relay held meanwhile.
 *
 *   bun bench/uploads-rss.ts            # 8 and 32 uploads of 100 MiB
 *   UPLOADS_RSS_COUNTS=8 UPLOADS_RSS_MIB=100 bun bench/uploads-rss.ts
 */
import { randomBytes } from 'node:crypto'
import { connect } from 'node:net'
import { ensureBinary, fmt, rssMiB, startRelayBinary } from './lib.ts'

const MiB = 1024 * 1024
const COUNTS = (process.env.UPLOADS_RSS_COUNTS ?? '8,32').split(',').map(Number)
const SIZE_MIB = Number(process.env.UPLOADS_RSS_MIB ?? 100)

ensureBinary()
const { proc, port } = await startRelayBinary()

function upload(size: number): Promise<string> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port })
    const chunk = Buffer.alloc(MiB, 0x42)
    let got = ''
    let error = ''
    s.on('data', (d) => (got += d.toString('latin1')))
    s.on('error', (e: NodeJS.ErrnoException) => (error = e.code ?? e.message))
    s.on('close', () => resolve(/^HTTP\/1\.1 (\d+)/.exec(got)?.[1] ?? `no answer${error ? ` (${error})` : ''}`))
    s.on('connect', async () => {
      const headers = `X-M2M-Public-Key: ${randomBytes(32).toString('base64url')}\r\nX-M2M-Timestamp: ${new Date().toISOString()}\r\nX-M2M-Signature: ${randomBytes(64).toString('base64url')}\r\n`
      s.write(`POST /v1/blobs HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/octet-stream\r\nContent-Length: ${size}\r\n${headers}\r\n`)
      for (let sent = 0; sent < size && !s.destroyed; sent += MiB) {
        if (!s.write(chunk)) await new Promise((r) => s.once('drain', r))
      }
    })
  })
}

try {
  for (const n of COUNTS) {
    await Bun.sleep(500)
    const before = rssMiB(proc.pid)
    let peak = before
    const timer = setInterval(() => (peak = Math.max(peak, rssMiB(proc.pid))), 50)
    const t0 = performance.now()
    const answers = await Promise.all(Array.from({ length: n }, () => upload(SIZE_MIB * MiB)))
    clearInterval(timer)
    const counts: Record<string, number> = {}
    for (const a of answers) counts[a] = (counts[a] ?? 0) + 1
    console.log(
      `${n} × ${SIZE_MIB} MiB forged uploads in ${fmt((performance.now() - t0) / 1000, 1)} s: answers ${JSON.stringify(counts)}; ` +
        `RSS ${fmt(before, 0)} → peak ${fmt(peak, 0)} MiB (+${fmt(peak - before, 0)})`,
    )
  }
} finally {
  proc.kill()
}
