/**
 * End-to-end encryption benchmark: prints figures, asserts nothing.
 *
 *   bun bench/crypto.ts                     # builds dist/relay, 100 MiB transfer
 *   BENCH_NO_BUILD=1 bun bench/crypto.ts    # reuse an existing dist/relay
 *   BENCH_SIZE_MIB=20 bun bench/crypto.ts   # a smaller file
 * (from the repository root, with node_modules/.bin on PATH)
 *
 * 1. seal + open of a 1 KiB JSON message, v2 and v3, in process, with the native (node:crypto) and the
 *    pure (@noble) primitives: mean time per seal+open in each of 11 rounds after a warm-up; the median
 *    round is the figure (the fastest and slowest are printed too). Goal: ≤ 0.5 ms (native).
 * 2. the attachment cipher alone, in process: encrypting and decrypting the file's size in memory-sized
 *    chunks through the streams, MB/s.
 * 3. an encrypted upload and download of a BENCH_SIZE_MIB file through the compiled relay over loopback,
 *    as the client does it: read and encrypt the file into SHA-256, then read and encrypt it again while
 *    the request body streams (no copy anywhere); then download, decrypt and write the file. MB/s of
 *    plaintext, and the bench process's peak RSS above its RSS before the transfer (sampled every
 *    10 ms). Goals: ≥ 200 MB/s, ≤ +32 MiB. BENCH_ROUNDS=n repeats the transfers (default 1) and ends
 *    with each figure's median, lowest and highest over the rounds: one 100 MiB transfer is a fraction of
 *    a second, and the disk's flush of it varies from round to round.
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { open } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { generateKeyPair } from '../src/auth/sign.ts'
import { RelayClient } from '../src/client/index.ts'
import { bindEncryption } from '../src/crypto/index.ts'
import { nativePrimitives } from '../src/crypto/native.ts'
import { purePrimitives } from '../src/crypto/pure.ts'
import { ensureBinary, percentile, startRelayBinary } from './lib.ts'

const SIZE = Number(process.env.BENCH_SIZE_MIB ?? 100) * 1024 * 1024
const MB = (bytes: number, ms: number) => (bytes / 1e6 / (ms / 1000)).toFixed(0)

// --- 1. messages ---
const alice = generateKeyPair()
const bob = generateKeyPair()
const body = { text: 'x'.repeat(1000) }
console.log('seal + open of a 1 KiB message (mean per pair, in process)')
for (const prims of [nativePrimitives, purePrimitives]) {
  const e2e = bindEncryption(prims)
  for (const version of [2, 3] as const) {
    const once = () => {
      const sealed = e2e.sealMessage({ version, sender: alice, recipientKey: bob.publicKey, body })
      e2e.openMessage(bob, { sender_key: alice.publicKey, recipient_key: bob.publicKey, ...sealed })
    }
    // rounds of n pairs after a warm-up; the median round, and the slowest, tell a quiet machine from a busy one
    const n = prims === nativePrimitives ? 200 : 10
    const rounds: number[] = []
    for (let i = 0; i < n; i++) once()
    for (let r = 0; r < 11; r++) {
      const t0 = performance.now()
      for (let i = 0; i < n; i++) once()
      rounds.push((performance.now() - t0) / n)
    }
    rounds.sort((a, b) => a - b)
    const median = rounds[5]!
    console.log(`  ${prims.name.padEnd(6)} v${version}: ${median.toFixed(3)} ms (median of 11 rounds of ${n}; fastest ${rounds[0]!.toFixed(3)}, slowest ${rounds[10]!.toFixed(3)})${prims === nativePrimitives ? '   (goal ≤ 0.5 ms)' : ''}`)
  }
}

// --- 2. the cipher alone ---
{
  const e2e = bindEncryption(nativePrimitives)
  const dek = e2e.newDek()
  const chunk = new Uint8Array(256 * 1024)
  const source = () => {
    let left = SIZE
    return new ReadableStream<Uint8Array>({
      pull(c) {
        if (left <= 0) return c.close()
        const n = Math.min(left, chunk.length)
        left -= n
        c.enqueue(chunk.subarray(0, n))
      },
    })
  }
  let t0 = performance.now()
  const parts: Uint8Array[] = []
  let stored = 0
  for await (const part of e2e.encryptBlobStream(dek, source()) as unknown as AsyncIterable<Uint8Array>) {
    stored += part.length
    if (parts.length < 2) parts.push(part)
  }
  const encMs = performance.now() - t0
  // decrypt a ciphertext of the same size: re-encrypt into segments on the fly, then time only decryption
  const cipher: Uint8Array[] = []
  for await (const part of e2e.encryptBlobStream(dek, source()) as unknown as AsyncIterable<Uint8Array>) cipher.push(part)
  t0 = performance.now()
  let plain = 0
  const replay = new ReadableStream<Uint8Array>({
    start(c) {
      for (const p of cipher) c.enqueue(p)
      c.close()
    },
  })
  for await (const part of e2e.decryptBlobStream(dek, replay) as unknown as AsyncIterable<Uint8Array>) plain += part.length
  const decMs = performance.now() - t0
  cipher.length = 0
  console.log(`attachment cipher alone (${SIZE / 1048576} MiB, in process): encrypt ${MB(SIZE, encMs)} MB/s, decrypt ${MB(plain, decMs)} MB/s (stored ${stored} bytes)`)
}

// --- 3. through the relay ---
ensureBinary()
const work = mkdtempSync(join(tmpdir(), 'relay-bench-crypto-'))
// the blob limit counts stored bytes: an encrypted file is 16 bytes per 64 KiB larger (+1 MiB of room)
const relay = await startRelayBinary({ RELAY_BLOB_MAX_SIZE: `${Math.ceil(SIZE / 1048576) + 1}MiB`, RELAY_BLOB_QUOTA: '10GiB' }, join(work, 'data'))
try {
  const file = join(work, 'plain.bin')
  const fh = await open(file, 'w')
  const block = crypto.getRandomValues(new Uint8Array(1024 * 1024))
  for (let at = 0; at < SIZE; at += block.length) await fh.write(block, 0, Math.min(block.length, SIZE - at))
  await fh.close()
  const sender = new RelayClient({ baseUrl: relay.url, keys: alice })
  const recipient = new RelayClient({ baseUrl: relay.url, keys: bob })
  await recipient.declareEncryption()

  const sample = () => {
    let peak = process.memoryUsage().rss
    const timer = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 10)
    return () => {
      clearInterval(timer)
      return Math.max(peak, process.memoryUsage().rss)
    }
  }
  const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 1)
  const rounds = { 'encrypted upload MB/s': [] as number[], 'encrypted download MB/s': [] as number[], 'plain upload MB/s': [] as number[], 'plain download MB/s': [] as number[], 'encrypted upload peak RSS MiB': [] as number[], 'encrypted download peak RSS MiB': [] as number[] }
  for (let round = 1; round <= ROUNDS; round++) {
    Bun.gc(true)
    let before = process.memoryUsage().rss
    let stop = sample()
    let t0 = performance.now()
    const up = await sender.uploadEncryptedBlob(file, { recipientKey: bob.publicKey })
    const upMs = performance.now() - t0
    const upPeak = stop() - before
    const sent = await sender.send({ recipient_key: bob.publicKey, body: 'file', attachments: [up.attachment] })
    const msg = await recipient.getMessage(sent.message_id)

    Bun.gc(true)
    before = process.memoryUsage().rss
    stop = sample()
    t0 = performance.now()
    const out = join(work, 'out.bin')
    await recipient.downloadDecryptedToFile(msg, msg.attachments![0]!, out)
    const downMs = performance.now() - t0
    const downPeak = stop() - before
    if (statSync(out).size !== SIZE) throw new Error('the download has the wrong size')
    // the same file unencrypted through the same client, for comparison
    Bun.gc(true)
    before = process.memoryUsage().rss
    stop = sample()
    t0 = performance.now()
    const plainBlob = await sender.uploadBlob(file)
    const plainUpMs = performance.now() - t0
    const plainUpPeak = stop() - before
    const sentPlain = await sender.send({ recipient_key: bob.publicKey, body: 'file', attachments: [{ blob_id: plainBlob.blob_id }], plain: true })
    const plainMsg = await recipient.getMessage(sentPlain.message_id)
    Bun.gc(true)
    before = process.memoryUsage().rss
    stop = sample()
    t0 = performance.now()
    await recipient.downloadToFile(plainMsg.attachments![0]!.blob_id, join(work, 'out-plain.bin'))
    const plainDownMs = performance.now() - t0
    const plainDownPeak = stop() - before
    const mib = (b: number) => (b / 1048576).toFixed(1)
    console.log(`${ROUNDS > 1 ? `round ${round}: ` : ''}plain upload / download of the same file, same client: ${MB(SIZE, plainUpMs)} / ${MB(SIZE, plainDownMs)} MB/s, peak RSS +${mib(plainUpPeak)} / +${mib(plainDownPeak)} MiB`)
    console.log(`${ROUNDS > 1 ? `round ${round}: ` : ''}encrypted upload of ${SIZE / 1048576} MiB through the relay: ${MB(SIZE, upMs)} MB/s, peak RSS +${mib(upPeak)} MiB   (goal ≥ 200 MB/s, ≤ +32 MiB)`)
    console.log(`${ROUNDS > 1 ? `round ${round}: ` : ''}encrypted download of ${SIZE / 1048576} MiB through the relay: ${MB(SIZE, downMs)} MB/s, peak RSS +${mib(downPeak)} MiB   (goal ≥ 200 MB/s, ≤ +32 MiB)`)
    rmSync(out)
    rmSync(join(work, 'out-plain.bin'))
    const rate = (ms: number) => SIZE / 1e6 / (ms / 1000)
    rounds['encrypted upload MB/s'].push(rate(upMs))
    rounds['encrypted download MB/s'].push(rate(downMs))
    rounds['plain upload MB/s'].push(rate(plainUpMs))
    rounds['plain download MB/s'].push(rate(plainDownMs))
    rounds['encrypted upload peak RSS MiB'].push(upPeak / 1048576)
    rounds['encrypted download peak RSS MiB'].push(downPeak / 1048576)
  }
  if (ROUNDS > 1) {
    console.log(`over ${ROUNDS} rounds: median (lowest–highest)`)
    for (const [name, values] of Object.entries(rounds)) {
      const sorted = [...values].sort((a, b) => a - b)
      const median = percentile(sorted, 50)
      const digits = name.endsWith('MiB') ? 1 : 0
      console.log(`  ${name}: ${median.toFixed(digits)} (${sorted[0]!.toFixed(digits)}–${sorted.at(-1)!.toFixed(digits)})`)
    }
  }
} finally {
  relay.proc.kill('SIGTERM')
  await relay.proc.exited
  rmSync(work, { recursive: true, force: true })
}
