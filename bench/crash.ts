/**
 * The long crash test: rounds of concurrent signed sends, blob uploads and webhook deliveries against the
 * compiled binary, each cut by `kill -9` at a random moment; then every message answered 201, every blob
 * answered 201/200 and every webhook delivery owed is checked (see test/e2e/crash-load.ts).
 *
 *   bun bench/crash.ts      CRASH_ROUNDS=12 CRASH_ROUND_MS=3000-10000 CRASH_SENDERS=24 CRASH_UPLOADERS=4
 *                           CRASH_BLOB_MAX=1048576
 */
import { rmSync } from 'node:fs'
import { crashRounds } from '../test/e2e/crash-load.ts'
import { tempDataDir } from '../test/e2e/binary.ts'
import { fmt } from './lib.ts'

const [lo, hi] = (process.env.CRASH_ROUND_MS ?? '3000-10000').split('-').map(Number)
const dataDir = tempDataDir()
try {
  const r = await crashRounds({
    dataDir,
    rounds: Number(process.env.CRASH_ROUNDS ?? 12),
    roundMs: [lo, hi ?? lo],
    senders: Number(process.env.CRASH_SENDERS ?? 24),
    uploaders: Number(process.env.CRASH_UPLOADERS ?? 4),
    blobMaxBytes: Number(process.env.CRASH_BLOB_MAX ?? 1024 * 1024),
    deliveryWaitMs: 60_000,
    log: (line) => console.log(line),
  })
  console.log(
    `${r.rounds} rounds of kill -9 in ${fmt(r.elapsedMs / 1000, 1)} s: ${r.messages} messages acknowledged (${r.hookedMessages} to webhook recipients), ${r.blobs} blobs acknowledged`,
  )
  console.log(
    `lost messages ${r.missingMessages.length}, blobs missing or damaged ${r.badBlobs.length}, webhook deliveries never made ${r.undelivered.length}, ` +
      `deliveries repeated after a kill ${r.repeatedDeliveries}, delivery ids that changed ${r.changedDeliveryIds.length}`,
  )
  if (r.missingMessages.length + r.badBlobs.length + r.undelivered.length + r.changedDeliveryIds.length) {
    console.log(JSON.stringify({ missing: r.missingMessages.slice(0, 20), blobs: r.badBlobs.slice(0, 20), undelivered: r.undelivered.slice(0, 20) }))
    process.exitCode = 1
  }
} finally {
  rmSync(dataDir, { recursive: true, force: true })
}
