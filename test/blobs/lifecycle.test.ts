/** Blob lifetime and cleanup (docs/protocol.md §6), start-up cleanup, agent deletion, health and metrics. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { chmodSync, existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { BASE_URL, expectError, startTestRelay, type TestRelay } from '../support/harness.ts'
import { parsePrometheus } from '../support/prometheus.ts'
import { blobFiles, blobRecords, enc, randomContent, sha256Hex, sweep, tempFiles, uploadText } from './helpers.ts'

const HOUR = 3600_000
let t: TestRelay
beforeAll(async () => {
  t = await startTestRelay({ blobs: { unattachedTtlMs: 2 * HOUR }, rateLimits: { sendPerMin: 0, pollPerMin: 0 }, metrics: { enabled: true, addr: null } })
})
afterAll(() => t.close())

const fileOf = (hash: string) => `${hash.slice(0, 2)}/${hash.slice(2, 4)}/${hash}`

describe('expiry (fake clock)', () => {
  test('an unattached blob is unreadable the instant it expires; the sweep removes record and file', async () => {
    const a = t.client()
    const b = await uploadText(a, 'short-lived ' + Math.random())
    expect(Date.parse(b.expires_at) - Date.parse(b.created_at)).toBe(2 * HOUR)
    t.clock.advance(2 * HOUR - 1)
    expect((await a.downloadBlob(b.blob_id)).status).toBe(200)
    t.clock.advance(1)
    await expectError(await a.transport.send('GET', `/v1/blobs/${b.blob_id}`), 404, 'blob_not_found')
    expect((await blobRecords(t)).some((r) => r.blob_id === b.blob_id)).toBe(true) // not swept yet, already unreadable
    const result = await sweep(t)
    expect(result.expired_records).toBeGreaterThanOrEqual(1)
    expect((await blobRecords(t)).some((r) => r.blob_id === b.blob_id)).toBe(false)
    expect(blobFiles(t)).not.toContain(fileOf(b.hash))
  })

  test('shared content stays on disk until its last record is gone', async () => {
    const text = 'shared ' + Math.random()
    const x = await uploadText(t.client(), text)
    t.clock.advance(HOUR)
    const y = await uploadText(t.client(), text)
    expect(y.hash).toBe(x.hash)
    t.clock.advance(HOUR)
    await sweep(t)
    expect((await blobRecords(t)).map((r) => r.blob_id)).not.toContain(x.blob_id)
    expect(blobFiles(t)).toContain(fileOf(x.hash))
    t.clock.advance(HOUR)
    await sweep(t)
    expect(blobFiles(t)).not.toContain(fileOf(x.hash))
  })

  test('an upload that arrives while the sweep removes the last record of its content keeps its bytes', async () => {
    const text = 'resurrected ' + Math.random()
    const a = t.client()
    const x = await uploadText(a, text)
    t.clock.advance(2 * HOUR)
    const [, again] = await Promise.all([sweep(t), uploadText(t.client(), text)])
    expect(again.hash).toBe(x.hash)
    await sweep(t)
    expect(blobFiles(t)).toContain(fileOf(x.hash))
  })
})

describe('start-up cleanup', () => {
  test('removes temp files and files no record names; keeps stored blobs and unexpected names', async () => {
    const local = await startTestRelay()
    try {
      const a = local.client()
      const kept = await uploadText(a, 'kept across restarts')
      await local.relay.features.blobs.startupCleanup // this start's own comparison is over
      const orphanHash = sha256Hex('orphan')
      const { blobs, tmp } = local.relay.paths
      mkdirSync(join(blobs, orphanHash.slice(0, 2), orphanHash.slice(2, 4)), { recursive: true })
      writeFileSync(join(blobs, fileOf(orphanHash)), 'orphan')
      writeFileSync(join(tmp, 'upload-0123456789abcdef01234567'), 'half an upload')
      writeFileSync(join(tmp, 'someone-elses-file'), 'not ours')
      writeFileSync(join(blobs, 'README'), 'an operator note')
      await local.restart()
      // temp files go before the relay serves; the directory comparison runs alongside
      expect(tempFiles(local)).toEqual(['someone-elses-file'])
      expect(await local.relay.features.blobs.startupCleanup).toEqual({ temp_files: 1, files_removed: 1 })
      expect(blobFiles(local)).toEqual(['README', fileOf(kept.hash)].sort())
      expect(await (await a.downloadBlob(kept.blob_id)).text()).toBe('kept across restarts')
    } finally {
      await local.close()
    }
  })

  test('a data directory whose blob directory went missing gets it back', async () => {
    const local = await startTestRelay()
    try {
      await local.relay.stop()
      rmSync(local.relay.paths.blobs, { recursive: true })
      await local.restart()
      expect(existsSync(local.relay.paths.blobs)).toBe(true)
      expect((await local.client().uploadBlob(enc('again'))).size).toBe(5)
    } finally {
      await local.close()
    }
  })
})

describe('agent deletion', () => {
  test("the agent's unreferenced blobs go; one attached to a message to someone else stays readable by them", async () => {
    const a = t.client()
    const b = t.client()
    const alone = await uploadText(a, 'alone ' + Math.random())
    const sent = await uploadText(a, 'sent to b ' + Math.random())
    await a.send({ recipient_key: b.publicKey, attachments: [{ blob_id: sent.blob_id }] })
    await a.deleteAgent()
    const ids = (await blobRecords(t)).map((r) => r.blob_id)
    expect(ids).not.toContain(alone.blob_id)
    expect(ids).toContain(sent.blob_id)
    expect(await (await b.downloadBlob(sent.blob_id)).text()).toStartWith('sent to b')
    // the orphaned file is found by the rotating comparison of the blob directory
    await t.relay.features.blobs.sweeper.scanAll()
    expect(blobFiles(t)).not.toContain(fileOf(alone.hash))
    expect(blobFiles(t)).toContain(fileOf(sent.hash))
  })

  test('the periodic sweep visits every directory within 16 runs', async () => {
    const orphan = sha256Hex('periodic orphan ' + Math.random())
    mkdirSync(join(t.relay.paths.blobs, orphan.slice(0, 2), orphan.slice(2, 4)), { recursive: true })
    writeFileSync(join(t.relay.paths.blobs, fileOf(orphan)), 'x')
    let removed = 0
    for (let i = 0; i < 16; i++) removed += (await sweep(t)).files_removed
    // the orphan, and whatever earlier tests left for the sweep
    expect(removed).toBeGreaterThanOrEqual(1)
    expect(blobFiles(t)).not.toContain(fileOf(orphan))
  })
})

describe('health and metrics', () => {
  test('health details: blob_store with bytes, file count and free disk', async () => {
    const local = await startTestRelay()
    try {
      const a = local.client()
      await a.uploadBlob(randomContent(1000))
      await a.uploadBlob(randomContent(500))
      await local.client().uploadBlob(enc('x'.repeat(10)))
      await local.client().uploadBlob(enc('x'.repeat(10)))
      const details: any = await (await local.handle(new Request(BASE_URL + '/v1/health/details'))).json()
      const store = details.components.blob_store
      expect(store.status).toBe('ok')
      expect(store.bytes).toBe(1510)
      expect(store.files).toBe(3)
      expect(store.free_bytes).toBeGreaterThan(0)
      expect(store.uploads_in_flight).toBe(0)
    } finally {
      await local.close()
    }
  })

  test('ready fails while the blob directory is not writable', async () => {
    const local = await startTestRelay()
    const ready = () => local.handle(new Request(BASE_URL + '/v1/health/ready'))
    const { blobs } = local.relay.paths
    try {
      expect((await ready()).status).toBe(200)
      // a file where the directory was: not writable, even for root
      renameSync(blobs, blobs + '.away')
      writeFileSync(blobs, '')
      const res = await ready()
      expect(res.status).toBe(503)
      const body: any = await res.json()
      expect(body.status).toBe('unavailable')
      expect(body.problems.blob_store).toContain('not writable')
      rmSync(blobs)
      renameSync(blobs + '.away', blobs)
      chmodSync(blobs, 0o700)
      expect((await ready()).status).toBe(200)
    } finally {
      await local.close()
    }
  })

  test('relay_blob_uploaded_bytes_total counts the bytes of successful uploads', async () => {
    const scrape = async () => parsePrometheus(await (await t.handle(new Request(BASE_URL + '/metrics'))).text())
    const value = async () => (await scrape()).get('relay_blob_uploaded_bytes_total')?.samples[0]?.value ?? 0
    const before = await value()
    await t.client().uploadBlob(randomContent(1234))
    expect(await value()).toBe(before + 1234)
  })
})

describe('damaged files', () => {
  test('an upload of content whose stored file was truncated replaces the file', async () => {
    const bytes = randomContent(5000)
    const a = t.client()
    const x = await a.uploadBlob(bytes)
    const path = join(t.relay.paths.blobs, fileOf(x.hash))
    writeFileSync(path, bytes.subarray(0, 100))
    await expectError(await a.transport.send('GET', `/v1/blobs/${x.blob_id}`), 404, 'blob_not_found')
    const y = await t.client().uploadBlob(bytes)
    expect(y.hash).toBe(x.hash)
    expect(sha256Hex(new Uint8Array(await (await a.downloadBlob(x.blob_id)).arrayBuffer()))).toBe(x.hash)
  })
})
