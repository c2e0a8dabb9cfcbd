/**
 * The BlobStore contract (src/services/ports.ts), run unchanged against every implementation: the blob
 * directory (blobs/local) and an S3-compatible bucket (blobs/s3, against a real s3rver process).
 * Each test gets a store of its own (a new directory, or a new key prefix in the one bucket) and looks
 * behind it only through `Subject`: what staging is left, and entries written as damage or leftovers.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { readdir } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { S3Client } from 'bun'

import { LocalBlobStore } from '../../src/blobs/local/local-blob-store.ts'
import { S3BlobStore, s3StoreFromUrl } from '../../src/blobs/s3/s3-blob-store.ts'
import { RelayError } from '../../src/errors.ts'
import { FakeClock } from '../../src/lib/clock.ts'
import { BlobTooLargeError, type BlobStore, type ReceiveOptions, type StagedBlob } from '../../src/services/ports.ts'
import { s3ServerRunner, startS3Server, type S3Server } from '../support/s3.ts'

const MiB = 1024 * 1024
const HOUR_MS = 60 * 60 * 1000

interface Subject {
  store: BlobStore & { readonly unverifiedBytes: number }
  clock: FakeClock
  /** Staging entries present now (temp files, staging objects). */
  staging(): Promise<string[]>
  /** Overwrites the stored content of `hashHex` behind the store's back (a damaged copy). */
  damage(hashHex: string, bytes: Uint8Array): Promise<void>
  /** Puts an entry under slice `aa` that is not a content in its place. */
  stray(slice: string): Promise<void>
  /** Leaves staging behind as a process that stopped during an upload would. */
  leaveStaging(): Promise<void>
  close(): Promise<void>
}

interface Implementation {
  name: string
  /** Null when the implementation cannot run here (printed why). */
  available: boolean
  setup?: () => Promise<void>
  teardown?: () => Promise<void>
  open(opts?: { preAuthBytes?: number }): Promise<Subject>
}

const local: Implementation = {
  name: 'directory',
  available: true,
  async open(opts = {}) {
    const dir = mkdtempSync(join(tmpdir(), 'relay-blob-contract-'))
    const root = join(dir, 'blobs')
    const tmp = join(dir, 'tmp')
    const store = new LocalBlobStore(root, tmp, opts.preAuthBytes)
    const clock = new FakeClock()
    return {
      store,
      clock,
      staging: async () => (await readdir(tmp)).filter((n) => !n.startsWith('ready-')),
      async damage(hashHex, bytes) {
        const path = store.pathOf(hashHex)
        mkdirSync(dirname(path), { recursive: true })
        writeFileSync(path, bytes)
      },
      async stray(slice) {
        mkdirSync(join(root, slice, 'zz'), { recursive: true })
        writeFileSync(join(root, slice, 'zz', 'notes.txt'), 'x')
        mkdirSync(join(root, slice, slice), { recursive: true })
        writeFileSync(join(root, slice, slice, `${slice}${'0'.repeat(62)}.tmp`), 'x')
      },
      async leaveStaging() {
        writeFileSync(join(tmp, 'upload-0123456789abcdef01234567'), 'left by a stopped process')
      },
      async close() {
        rmSync(dir, { recursive: true, force: true })
      },
    }
  },
}

const node = s3ServerRunner('BlobStore contract against S3')
let server: S3Server | null = null
let prefixes = 0
const s3: Implementation = {
  name: 's3',
  available: node !== null,
  async setup() {
    server = await startS3Server(node as string)
  },
  async teardown() {
    await server?.stop()
  },
  async open(opts = {}) {
    const srv = server as S3Server
    const prefix = `contract-${++prefixes}/`
    const clock = new FakeClock()
    // parts of 5 MiB (the default, S3's minimum): tests of a few MiB already go through multipart uploads
    const store = s3StoreFromUrl(srv.url(prefix), srv.env, clock, { preAuthBytes: opts.preAuthBytes })
    const raw = new S3Client({ endpoint: srv.endpoint, bucket: srv.bucket, accessKeyId: srv.env.AWS_ACCESS_KEY_ID, secretAccessKey: srv.env.AWS_SECRET_ACCESS_KEY, region: 'us-east-1' })
    const keys = async (under: string) => ((await raw.list({ prefix: prefix + under })).contents ?? []).map((o) => o.key)
    return {
      store,
      clock,
      staging: async () => (await keys('staging/')).filter((k) => !k.includes('-ready-')),
      async damage(hashHex, bytes) {
        await raw.write(store.keyOf(hashHex), bytes)
      },
      async stray(slice) {
        await raw.write(`${prefix}${slice}/zz/notes.txt`, 'x')
        await raw.write(`${prefix}${slice}/${slice}/${slice}${'0'.repeat(62)}.tmp`, 'x')
      },
      async leaveStaging() {
        await raw.write(`${prefix}staging/${clock.now()}-0123456789abcdef01234567`, 'left by a stopped process')
      },
      async close() {
        for (const k of await keys('')) await raw.delete(k)
      },
    }
  },
}

const sha256 = (b: Uint8Array) => new Bun.CryptoHasher('sha256').update(b).digest()

function content(size: number, seed = Math.random()): Uint8Array {
  const b = new Uint8Array(size)
  crypto.getRandomValues(b.subarray(0, Math.min(size, 65536)))
  for (let i = 65536; i < size; i += 65536) b.set(b.subarray(0, Math.min(65536, size - i)), i)
  if (size >= 8) new DataView(b.buffer).setFloat64(0, seed)
  return b
}

/** A body that arrives in `chunk` pieces (no declared length), optionally failing after `failAfter` bytes. */
function stream(bytes: Uint8Array, chunk = 64 * 1024, failAfter?: number): ReadableStream<Uint8Array> {
  let at = 0
  return new ReadableStream({
    pull(controller) {
      if (failAfter !== undefined && at >= failAfter) return controller.error(new DOMException('The client went away', 'AbortError'))
      if (at >= bytes.length) return controller.close()
      controller.enqueue(bytes.slice(at, at + chunk))
      at += chunk
    },
  })
}

async function bytesOf(r: Blob | ReadableStream<Uint8Array>): Promise<Uint8Array> {
  return new Uint8Array(await new Response(r).arrayBuffer())
}

const opts = (o: Partial<ReceiveOptions> = {}): ReceiveOptions => ({ maxBytes: 64 * MiB, ...o })

async function collect(it: AsyncIterable<string>): Promise<string[]> {
  const out: string[] = []
  for await (const h of it) out.push(h)
  return out
}

for (const impl of [local, s3]) {
  describe.skipIf(!impl.available)(`BlobStore contract: ${impl.name}`, () => {
    const open: Subject[] = []
    beforeAll(async () => {
      await impl.setup?.()
    })
    afterAll(async () => {
      for (const s of open) await s.close()
      await impl.teardown?.()
    })
    const subject = async (o?: { preAuthBytes?: number }) => {
      const s = await impl.open(o)
      open.push(s)
      return s
    }
    const storeBytes = async (s: Subject, bytes: Uint8Array): Promise<StagedBlob> => {
      const staged = await s.store.receive(stream(bytes), opts())
      await s.store.place(staged)
      return staged
    }

    test('receive hashes and sizes a streamed body; place stores it under its hash; read returns it', async () => {
      const s = await subject()
      const bytes = content(300_000)
      const staged = await s.store.receive(stream(bytes, 7000), opts())
      expect(staged.hashHex).toBe(sha256(bytes).toString('hex'))
      expect(staged.hashBase64Url).toBe(sha256(bytes).toString('base64url'))
      expect(staged.size).toBe(bytes.length)
      expect(staged.staging).not.toBeNull()
      expect(await s.staging()).toHaveLength(1)
      expect(s.store.unverifiedBytes).toBe(bytes.length)
      expect(await s.store.size(staged.hashHex)).toBeNull()
      await s.store.place(staged)
      expect(await s.staging()).toEqual([])
      expect(s.store.unverifiedBytes).toBe(0)
      expect(await s.store.size(staged.hashHex)).toBe(bytes.length)
      expect(await bytesOf(await s.store.read(staged.hashHex))).toEqual(bytes)
    })

    test('a body of declared length, and one larger than a multipart part, arrive whole', async () => {
      const s = await subject()
      const small = content(100_000)
      const a = await s.store.receive(new Response(small).body, opts({ declaredBytes: small.length }))
      expect(a.hashHex).toBe(sha256(small).toString('hex'))
      await s.store.place(a)
      const large = content(11 * MiB + 12_345)
      const b = await s.store.receive(stream(large, 100_000), opts())
      expect(b.hashHex).toBe(sha256(large).toString('hex'))
      expect(b.size).toBe(large.length)
      await s.store.place(b)
      expect(await s.store.size(b.hashHex)).toBe(large.length)
      expect(await bytesOf(await s.store.read(b.hashHex))).toEqual(large)
      expect(await bytesOf(await s.store.read(a.hashHex))).toEqual(small)
    })

    test('an empty body, and no body at all, are the empty content', async () => {
      const s = await subject()
      const empty = sha256(new Uint8Array(0)).toString('hex')
      const a = await s.store.receive(stream(new Uint8Array(0)), opts())
      expect(a).toMatchObject({ hashHex: empty, size: 0 })
      await s.store.place(a)
      const b = await s.store.receive(null, opts())
      expect(b).toMatchObject({ hashHex: empty, size: 0 })
      await s.store.place(b)
      expect(await s.store.size(empty)).toBe(0)
      expect(await bytesOf(await s.store.read(empty))).toEqual(new Uint8Array(0))
      expect(await s.staging()).toEqual([])
    })

    test('too large without a declared length: BlobTooLargeError as the limit passes, nothing left', async () => {
      const s = await subject()
      const bytes = content(200_001)
      const err = await s.store.receive(stream(bytes, 10_000), opts({ maxBytes: 200_000 })).catch((e) => e)
      expect(err).toBeInstanceOf(BlobTooLargeError)
      expect((err as BlobTooLargeError).limitBytes).toBe(200_000)
      expect(await s.staging()).toEqual([])
      expect(s.store.unverifiedBytes).toBe(0)
    })

    test('too large with a declared length (more sent than declared, or declared over the limit): nothing left', async () => {
      const s = await subject()
      const bytes = content(150_000)
      const lying = await s.store.receive(new Response(bytes).body, opts({ maxBytes: 100_000, declaredBytes: 90_000 })).catch((e) => e)
      expect(lying).toBeInstanceOf(BlobTooLargeError)
      const over = await s.store.receive(stream(bytes), opts({ maxBytes: 100_000, declaredBytes: 150_000 })).catch((e) => e)
      expect(over).toBeInstanceOf(BlobTooLargeError)
      expect(await s.staging()).toEqual([])
      expect(s.store.unverifiedBytes).toBe(0)
    })

    test('keep() false from the start: hashed only, nothing staged at any moment', async () => {
      const s = await subject()
      const bytes = content(500_000)
      const asked: number[] = []
      const stagedMeanwhile: number[] = []
      let at = 0
      const body = new ReadableStream<Uint8Array>({
        async pull(controller) {
          stagedMeanwhile.push((await s.staging()).length)
          if (at >= bytes.length) return controller.close()
          controller.enqueue(bytes.slice(at, at + 100_000))
          at += 100_000
        },
      })
      const staged = await s.store.receive(body, opts({ keep: (n) => (asked.push(n), false), declaredBytes: bytes.length }))
      expect(staged).toMatchObject({ hashHex: sha256(bytes).toString('hex'), size: bytes.length, staging: null })
      expect(asked.length).toBeGreaterThan(0)
      expect(stagedMeanwhile.length).toBeGreaterThan(3)
      expect(stagedMeanwhile.every((n) => n === 0)).toBe(true)
      expect(await s.staging()).toEqual([])
      expect(s.store.unverifiedBytes).toBe(0)
    })

    test('keep() turning false part way (after a multipart upload began): what was stored is removed, the rest hashed', async () => {
      const s = await subject()
      const bytes = content(12 * MiB)
      const staged = await s.store.receive(stream(bytes, 256 * 1024), opts({ keep: (n) => n <= 11 * MiB }))
      expect(staged).toMatchObject({ hashHex: sha256(bytes).toString('hex'), size: bytes.length, staging: null })
      expect(await s.staging()).toEqual([])
      expect(s.store.unverifiedBytes).toBe(0)
    })

    test('the pre-auth budget: beyond it bytes are only hashed; placing or discarding gives it back', async () => {
      const s = await subject({ preAuthBytes: 1 * MiB })
      const a = await s.store.receive(stream(content(600_000)), opts())
      expect(a.staging).not.toBeNull()
      expect(s.store.unverifiedBytes).toBe(600_000)
      const b = await s.store.receive(stream(content(600_000)), opts())
      expect(b.staging).toBeNull()
      expect(s.store.unverifiedBytes).toBe(600_000)
      await s.store.discard(a)
      expect(s.store.unverifiedBytes).toBe(0)
      expect(await s.staging()).toEqual([])
      const c = await s.store.receive(stream(content(600_000)), opts())
      expect(c.staging).not.toBeNull()
      await s.store.place(c)
      expect(s.store.unverifiedBytes).toBe(0)
    })

    for (const [what, size] of [
      ['early', 100_000],
      ['after a multipart upload began', 11 * MiB],
    ] as const) {
      test(`the client goes away (${what}): 400 bad_request, nothing left`, async () => {
        const s = await subject()
        const bytes = content(size + MiB)
        const err = await s.store.receive(stream(bytes, 64 * 1024, size), opts()).catch((e) => e)
        expect(err).toBeInstanceOf(RelayError)
        expect((err as RelayError).code).toBe('bad_request')
        expect(await s.staging()).toEqual([])
        expect(s.store.unverifiedBytes).toBe(0)
      })
    }

    test('place is idempotent: the same content twice is stored once, each staging is gone', async () => {
      const s = await subject()
      const bytes = content(50_000)
      const a = await s.store.receive(stream(bytes), opts())
      const b = await s.store.receive(stream(bytes, 3333), opts())
      expect(b.hashHex).toBe(a.hashHex)
      await s.store.place(a)
      await s.store.place(b)
      expect(await s.staging()).toEqual([])
      expect(await collect(s.store.list(a.hashHex.slice(0, 2)))).toEqual([a.hashHex])
      expect(await bytesOf(await s.store.read(a.hashHex))).toEqual(bytes)
    })

    test('place replaces a stored copy of the wrong size', async () => {
      const s = await subject()
      const bytes = content(40_000)
      const hash = sha256(bytes).toString('hex')
      await s.damage(hash, bytes.subarray(0, 1000))
      expect(await s.store.size(hash)).toBe(1000)
      await storeBytes(s, bytes)
      expect(await s.store.size(hash)).toBe(bytes.length)
      expect(await bytesOf(await s.store.read(hash))).toEqual(bytes)
      expect(await s.staging()).toEqual([])
    })

    test('discard drops staged bytes; the content is never stored', async () => {
      const s = await subject()
      const staged = await s.store.receive(stream(content(70_000)), opts())
      await s.store.discard(staged)
      expect(await s.staging()).toEqual([])
      expect(await s.store.size(staged.hashHex)).toBeNull()
      await s.store.discard({ ...staged, staging: null })
    })

    test('read: inclusive ranges of the content', async () => {
      const s = await subject()
      const bytes = content(1_000_003)
      const { hashHex } = await storeBytes(s, bytes)
      for (const [start, end] of [
        [0, 0],
        [0, 9],
        [10, 19],
        [500_000, 999_999],
        [1_000_002, 1_000_002],
        [0, 1_000_002],
      ]) {
        expect(await bytesOf(await s.store.read(hashHex, { start, end }))).toEqual(bytes.subarray(start, end + 1))
      }
    })

    test('delete removes the content; deleting what is gone is no error', async () => {
      const s = await subject()
      const { hashHex } = await storeBytes(s, content(10_000))
      await s.store.delete(hashHex)
      expect(await s.store.size(hashHex)).toBeNull()
      expect(await collect(s.store.list(hashHex.slice(0, 2)))).toEqual([])
      await s.store.delete(hashHex)
      await s.store.delete('0'.repeat(64))
    })

    test('list: the stored hashes of one slice, nothing else', async () => {
      const s = await subject()
      const hashes: string[] = []
      for (let i = 0; i < 12; i++) hashes.push((await storeBytes(s, content(100 + i))).hashHex)
      const slice = hashes[0].slice(0, 2)
      await s.stray(slice)
      const listed = await collect(s.store.list(slice))
      expect(listed.sort()).toEqual(hashes.filter((h) => h.startsWith(slice)).sort())
      let total = 0
      for (let i = 0; i < 256; i++) total += (await collect(s.store.list(i.toString(16).padStart(2, '0')))).length
      expect(total).toBe(hashes.length)
      await expect(collect(s.store.list('a'))).rejects.toThrow()
      await expect(collect(s.store.list('../'))).rejects.toThrow()
    })

    test('removeStaleStaging removes staging left by a stopped process, never a pending upload of its own', async () => {
      const s = await subject()
      const pending = await s.store.receive(stream(content(20_000)), opts())
      await s.leaveStaging()
      expect(await s.staging()).toHaveLength(2)
      // a bucket's staging is judged by age (other instances may be uploading): past an hour it is stale
      s.clock.advance(2 * HOUR_MS)
      expect(await s.store.removeStaleStaging()).toBe(1)
      const remaining = await s.staging()
      expect(remaining).toHaveLength(1)
      expect(pending.staging).toEndWith(remaining[0].split('/').pop() as string)
      await s.store.place(pending)
      expect(await s.store.size(pending.hashHex)).toBe(20_000)
      expect(await s.store.removeStaleStaging()).toBe(0)
    })

    test('ready: null while the store takes writes', async () => {
      const s = await subject()
      expect(await s.store.ready()).toBeNull()
      expect(await s.staging()).toEqual([])
    })

    test('freeBytes: the free disk of a directory, unknown (null) for a bucket', async () => {
      const s = await subject()
      const free = await s.store.freeBytes()
      if (s.store instanceof S3BlobStore) expect(free).toBeNull()
      else expect(free).toBeGreaterThan(0)
    })

    test('a 100 MiB upload streams through: peak RSS grows by at most 64 MiB, the bytes arrive whole', async () => {
      // the store runs alone in a child process fed on its standard input, so that the kernel's
      // high-water mark (VmHWM) is the store's peak, not the test runner's garbage
      const s = await subject()
      const SIZE = 100 * MiB
      const CHUNK = 256 * 1024
      const target = impl.name === 'directory' ? mkdtempSync(join(tmpdir(), 'relay-blob-rss-')) : (server as S3Server).url(`rss-${++prefixes}/`)
      const child = Bun.spawn([process.execPath, join(import.meta.dir, 'upload-rss-child.ts'), impl.name, target], {
        stdin: 'pipe',
        stdout: 'pipe',
        stderr: 'pipe',
        env: { ...process.env, ...(server?.env ?? {}) },
      })
      const expected = new Bun.CryptoHasher('sha256')
      const chunk = new Uint8Array(CHUNK)
      for (let sent = 0; sent < SIZE; sent += CHUNK) {
        chunk.fill(sent / CHUNK)
        new DataView(chunk.buffer).setFloat64(8, Math.random())
        expected.update(chunk)
        child.stdin.write(chunk)
        await child.stdin.flush()
      }
      await child.stdin.end()
      const [out, err, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited])
      expect({ code, err: code === 0 ? '' : err }).toEqual({ code: 0, err: '' })
      const report = JSON.parse(out) as { hashHex: string; size: number; baselineKiB: number; peakKiB: number }
      const growthMiB = (report.peakKiB - report.baselineKiB) / 1024
      console.log(`${impl.name}: 100 MiB upload, peak RSS growth ${growthMiB.toFixed(1)} MiB`)
      expect(report.size).toBe(SIZE)
      expect(report.hashHex).toBe(expected.digest('hex'))
      expect(growthMiB).toBeLessThanOrEqual(64)
      const check = new Bun.CryptoHasher('sha256')
      const reader = impl.name === 'directory' ? new LocalBlobStore(join(target, 'blobs'), join(target, 'tmp')) : s3StoreFromUrl(target, (server as S3Server).env, s.clock)
      const read = await reader.read(report.hashHex)
      for await (const part of (read instanceof Blob ? read.stream() : read) as unknown as AsyncIterable<Uint8Array>) check.update(part)
      expect(check.digest('hex')).toBe(report.hashHex)
      await reader.delete(report.hashHex)
      if (impl.name === 'directory') rmSync(target, { recursive: true, force: true })
    })
  })
}
