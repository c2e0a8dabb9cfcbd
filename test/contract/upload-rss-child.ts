/**
 * Receives standard input into one blob store and reports the process's memory: the measured side of
 * the contract's "a 100 MiB upload streams through" test, alone in its process so that the figure is
 * the store's and not the test runner's.
 *
 *   bun upload-rss-child.ts directory <dir>     |   bun upload-rss-child.ts s3 <s3://bucket/prefix>  (AWS_* env)
 *
 * Prints one JSON line: { hashHex, size, baselineKiB, peakKiB } (peak: VmHWM, the kernel's high-water mark).
 */
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { LocalBlobStore } from '../../src/blobs/local/local-blob-store.ts'
import { s3StoreFromUrl } from '../../src/blobs/s3/s3-blob-store.ts'
import { systemClock } from '../../src/lib/clock.ts'
import type { BlobStore } from '../../src/services/ports.ts'

const [kind, where] = process.argv.slice(2)
let store: BlobStore
if (kind === 'directory') {
  for (const d of ['blobs', 'tmp']) mkdirSync(join(where, d), { recursive: true })
  store = new LocalBlobStore(join(where, 'blobs'), join(where, 'tmp'))
} else {
  store = s3StoreFromUrl(where, process.env, systemClock)
}
await store.check()

const status = async (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(await Bun.file('/proc/self/status').text())?.[1])
Bun.gc(true)
const baselineKiB = await status('VmRSS')
const staged = await store.receive(Bun.stdin.stream() as ReadableStream<Uint8Array>, { maxBytes: 200 * 1024 * 1024 })
await store.place(staged)
const peakKiB = await status('VmHWM')
process.stdout.write(JSON.stringify({ hashHex: staged.hashHex, size: staged.size, baselineKiB, peakKiB }) + '\n')
