/**
 * What an idle authenticated WebSocket keeps on the relay's JavaScript heap: prints figures, asserts nothing.
 *
 *   N=5000 bun bench/socket-heap.ts
 *
 * The relay runs in this process (rate limits off, pre-auth caps widened as in bench/listeners.ts); N
 * sockets are opened by one client process of bench/listeners.ts. Heap size and object counts by type
 * are taken after a full collection before and after, and printed per socket (types that grew by at
 * least N/2). RSS per socket is printed too, but bench/listeners.ts against the binary is the figure to quote.
 */
import { spawn } from 'bun'
import { heapStats } from 'bun:jsc'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { withOverrides } from '../src/config/load.ts'
import { silentLogger } from '../src/lib/logger.ts'
import { openRelay } from '../src/relay.ts'
const N = Number(process.env.N ?? 5000)
const dataDir = mkdtempSync(join(tmpdir(), 'heapdiag-'))
const relay = await openRelay(withOverrides({ dataDir, port: 0, logLevel: 'error', rateLimits: { sendPerMin: 0, pollPerMin: 0, addressPerMin: 0, newAgentsPerHour: 0 }, ws: { preauthMax: 2048, preauthPerAddress: 0 } } as any), { logger: silentLogger })
const { port } = await relay.start()
let authed = 0
const p = spawn([process.execPath, join(import.meta.dir, 'listeners.ts'), '--client'], { env: { ...process.env, LB_INDEX: '0', LB_PORT: String(port), BENCH_CLIENTS: '1', BENCH_LISTENERS: String(N) }, stdout: 'inherit', stderr: 'inherit', ipc(m: any) { authed = m.authenticated } })
const snap = () => { Bun.gc(true); Bun.gc(true); const h = heapStats(); return { size: h.heapSize, counts: h.objectTypeCounts as Record<string, number>, rss: process.memoryUsage().rss } }
await Bun.sleep(500)
const a = snap()
p.send({ cmd: 'connect' })
while (authed < N) await Bun.sleep(50)
await Bun.sleep(3000)
const b = snap()
console.log(`N=${N} heap +${((b.size - a.size) / N).toFixed(0)} B/socket, rss +${((b.rss - a.rss) / N / 1024).toFixed(2)} KiB/socket`)
const diff = Object.keys(b.counts).map((k) => [k, (b.counts[k] ?? 0) - (a.counts[k] ?? 0)] as const).filter(([, d]) => d >= N / 2).sort((x, y) => y[1] - x[1])
for (const [k, d] of diff.slice(0, 25)) console.log(`  ${k}: +${d} (${(d / N).toFixed(2)} per socket)`)
p.kill()
await relay.stop()
rmSync(dataDir, { recursive: true, force: true })
process.exit(0)
