/**
 * Encrypted attachments of 0 bytes, 1 byte and 100 MiB from the console (Chromium) through the compiled
 * relay to the CLI: chosen in the file picker, encrypted in the browser, downloaded and decrypted by
 * `relay download --message`, and compared by SHA-256 with the originals. The page's JS memory (heap and
 * array buffers, read over the DevTools protocol while it encrypts and uploads) stays far below the
 * 100 MiB file: the console reads the file in slices and keeps the ciphertext in the browser's blob
 * storage. Neither the database (with its WAL) nor the blob directory holds the plaintext marker of the
 * file and the body. As in test/e2e/encrypted-large.test.ts, the relay allows 101 MiB blobs: an
 * encrypted 100 MiB file is 25,617 bytes over the default limit on stored bytes.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createHash } from 'node:crypto'
import { readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { encryptedBlobSize } from '../../src/crypto/index.ts'
import { buildBinary, startBinary, type RunningBinary, stopBinary } from '../support/binary.ts'
import { runCli } from '../support/cli.ts'
import { chromiumPath, openConsole } from '../support/console-browser.ts'
import { tempDir } from '../support/harness.ts'
import { requireProgram } from '../support/requires.ts'
import { expectNoMarkerIn, filesUnder } from '../support/disk.ts'

const hasChromium = requireProgram('chromium', chromiumPath(), 'the console 100 MiB encrypted attachment test')
const MARKER = 'CONSOLE-LARGE-PLAINTEXT-MARKER-7c21'
const SIZE = 100 * 1024 * 1024
const MiB = 1024 * 1024
const sha256 = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex')

let dir: string
let relay: RunningBinary

beforeAll(async () => {
  if (!hasChromium) return
  await buildBinary()
  dir = tempDir('relay-console-large-')
  relay = await startBinary({ cwd: dir, dataDir: join(dir, 'data'), env: { RELAY_BLOB_MAX_SIZE: '101MiB' } })
}, 120_000)

afterAll(async () => {
  if (!hasChromium) return
  await stopBinary(relay, dir)
})

describe('console → relay → CLI, encrypted attachments', () => {
  test.skipIf(!hasChromium)(
    '0 bytes, 1 byte and 100 MiB arrive whole; the page never holds the file; no plaintext on the relay’s disk',
    async () => {
      const files = [
        { name: 'empty.bin', bytes: Buffer.alloc(0) },
        { name: 'one.bin', bytes: Buffer.from('m') },
        { name: 'big.bin', bytes: Buffer.alloc(SIZE, MARKER) },
      ].map(({ name, bytes }) => {
        const path = join(dir, name)
        writeFileSync(path, bytes)
        return { name, path, size: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') }
      })
      const dave = (args: string[]) => runCli([...args, '--relay', relay.url, '--key', 'dave.key'], { cwd: dir })
      const daveKey = (await runCli(['keygen', '--out', 'dave.key'], { cwd: dir })).stdout.trim()
      expect((await dave(['profile', 'set', '--encryption', 'accept'])).code).toBe(0)

      const { page, context, errors, close } = await openConsole(relay.url, generateKeyPair())
      try {
        await page.getByRole('link', { name: 'Send' }).click()
        await page.getByLabel('Recipient public key').fill(daveKey)
        await page.getByLabel('Recipient public key').dispatchEvent('change')
        await page.locator('#encryption-note', { hasText: 'End-to-end encrypted (v3)' }).waitFor({ timeout: 5000 })
        await page.getByLabel('Body', { exact: true }).fill(`${MARKER} body`)
        // by path: the browser reads the file from disk, as it would a file someone picked
        await page.getByLabel('Attachments').setInputFiles(files.map((f) => f.path))

        // what the page's JS holds (V8 heap plus array buffers, after a collection: garbage is not held),
        // sampled while it encrypts and uploads
        const cdp = await context.newCDPSession(page)
        const jsBytes = async () => {
          await cdp.send('HeapProfiler.collectGarbage')
          const u = (await cdp.send('Runtime.getHeapUsage')) as { usedSize: number; backingStorageSize?: number }
          return u.usedSize + (u.backingStorageSize ?? 0)
        }
        const before = await jsBytes()
        let peak = before
        const bigState = page.locator('.upload').nth(2).locator('.upload-state')
        const started = performance.now()
        await page.getByRole('button', { name: 'Send', exact: true }).click()
        let encryptedMs = 0
        while (!(await page.locator('.sent-id').count())) {
          peak = Math.max(peak, await jsBytes())
          if (!encryptedMs && /^(uploading|done)/.test((await bigState.textContent().catch(() => '')) ?? '')) encryptedMs = performance.now() - started
          expect(errors).toEqual([])
          expect(await page.locator('[role=alert]').count()).toBe(0)
          await Bun.sleep(100)
        }
        const sentMs = performance.now() - started
        expect(await page.locator('.sent-how').textContent()).toBe('(end-to-end encrypted, v3)')
        const figures = { encrypt_mib_s: Math.round(SIZE / MiB / (encryptedMs / 1000)), encrypt_ms: Math.round(encryptedMs), send_ms: Math.round(sentMs), js_before_mib: +(before / MiB).toFixed(1), js_peak_mib: +(peak / MiB).toFixed(1) }
        console.log(`console 100 MiB encrypted send (machine shared): ${JSON.stringify(figures)}`)
        // holding the file would take 100 MiB, and its ciphertext as much again
        expect(peak - before).toBeLessThan(32 * MiB)
        expect(errors).toEqual([])
      } finally {
        await close()
      }

      const polled = await dave(['poll', '--json'])
      expect(polled.code).toBe(0)
      const [message] = JSON.parse(polled.stdout).messages
      expect(message).toMatchObject({ body: `${MARKER} body`, encryption: { version: 3, sender_verified: true } })
      expect(message.attachments.map((a: any) => [a.encrypted, a.size, 'filename' in a])).toEqual(files.map((f) => [true, encryptedBlobSize(f.size), false]))
      for (const [i, f] of files.entries()) {
        const out = join(dir, `${f.name}.out`)
        const got = await dave(['download', message.attachments[i].blob_id, '--message', message.message_id, '-o', out])
        expect([f.name, got.code, got.stderr]).toEqual([f.name, 0, ''])
        expect([f.name, statSync(out).size, sha256(out)]).toEqual([f.name, f.size, f.sha256])
        rmSync(out)
      }

      const stored = filesUnder(join(dir, 'data'))
      expect(stored.some((f) => f.endsWith('relay.db'))).toBe(true)
      // the check reads the 100 MiB ciphertext too
      expect(filesUnder(join(dir, 'data', 'blobs')).some((f) => statSync(f).size === encryptedBlobSize(SIZE))).toBe(true)
      expectNoMarkerIn(stored, MARKER)
    },
    120_000,
  )
})
