/**
 * What RELAY_DURABILITY=fsync costs the storage of a send, in process (no HTTP, no signatures): 64
 * workers, each in a loop reserving a replay entry and committing a message-sized write, as a signed
 * send does, on SQLite files in a temp directory; `process` and `fsync` alternate so that load from
 * elsewhere falls on both alike. Prints sends/s and latency per mode, median of rounds; asserts nothing.
 *
 *   bun bench/durability.ts            # BENCH_ROUNDS 4, BENCH_SECONDS 3, BENCH_CONCURRENCY 64
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { silentLogger } from '../src/lib/logger.ts'
import { SqliteStorage } from '../src/storage/sqlite/sqlite-storage.ts'
import { benchSize, percentile } from './lib.ts'

const ROUNDS = benchSize('BENCH_ROUNDS', 4, 2)
const SECONDS = benchSize('BENCH_SECONDS', 3, 1)
const CONCURRENCY = benchSize('BENCH_CONCURRENCY', 64, 8)
const filler = 'x'.repeat(1000)

async function run(durability: 'fsync' | 'process') {
  const dir = mkdtempSync(join(tmpdir(), 'relay-durability-'))
  const storage = new SqliteStorage({ path: join(dir, 'relay.db'), lockWaitMs: 5000, logger: silentLogger, now: Date.now(), durability })
  const latencies: number[] = []
  let n = 0
  const end = performance.now() + SECONDS * 1000
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async (_, w) => {
      while (performance.now() < end) {
        const t0 = performance.now()
        const reservation = await storage.replay.reserve(`sig-${w}-${n++}-${Math.random().toString(36).slice(2, 10)}`, Date.now() + 600_000)
        await Promise.all([reservation!.durable, storage.state.setNumber(`w${w}-${filler.slice(0, 200)}`, n)])
        latencies.push(performance.now() - t0)
      }
    }),
  )
  const syncs = (await storage.health()).syncs
  await storage.close()
  rmSync(dir, { recursive: true, force: true })
  latencies.sort((a, b) => a - b)
  return { rate: latencies.length / SECONDS, p50: percentile(latencies, 50), p99: percentile(latencies, 99), syncs }
}

const results: Record<string, Awaited<ReturnType<typeof run>>[]> = { process: [], fsync: [] }
for (let r = 0; r < ROUNDS; r++) {
  for (const mode of r % 2 === 0 ? (['process', 'fsync'] as const) : (['fsync', 'process'] as const)) {
    const x = await run(mode)
    results[mode].push(x)
    console.log(`round ${r + 1} ${mode.padEnd(7)} ${Math.round(x.rate)}/s  p50 ${x.p50.toFixed(2)} ms  p99 ${x.p99.toFixed(2)} ms${x.syncs ? `  syncs ${x.syncs}` : ''}`)
  }
}
const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const p = median(results.process.map((x) => x.rate))
const f = median(results.fsync.map((x) => x.rate))
console.log(`\nmedian: process ${Math.round(p)}/s, fsync ${Math.round(f)}/s, change ${(((f - p) / p) * 100).toFixed(1)} %`)
