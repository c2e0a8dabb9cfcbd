/**
 * Blob uploads are verified only once the whole body is hashed, so what they may write before that is
 * bounded: temp files of unverified uploads stay within RELAY_PREAUTH_DISK; beyond it the bytes are only
 * hashed, a forged upload costs no more disk, and a genuine one within its quota is told to retry (503).
 */
import { afterEach, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { createLogger } from '../../src/lib/logger.ts'
import { startTestRelay, type TestRelay } from '../support/harness.ts'
import { json, uploadRequest } from '../blobs/helpers.ts'
import { until } from '../support/ws.ts'
import { RawConnection, head } from './raw-http.ts'

const KiB = 1024
let open: TestRelay[] = []
afterEach(async () => {
  for (const t of open) await t.close()
  open = []
})

async function relay(diskBytes: number) {
  const t = await startTestRelay({ preauth: { diskBytes } })
  open.push(t)
  return t
}

const tempBytes = (t: TestRelay) => readdirSync(join(t.dataDir, 'tmp')).reduce((n, f) => n + statSync(join(t.dataDir, 'tmp', f)).size, 0)

/** A body of `bytes` in 64 KiB pieces that records, before each piece, the most the temp dir and the budget held. */
function watchedBody(t: TestRelay, bytes: Uint8Array) {
  const seen = { tempBytes: 0, unverifiedBytes: 0 }
  let at = 0
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      seen.tempBytes = Math.max(seen.tempBytes, tempBytes(t))
      seen.unverifiedBytes = Math.max(seen.unverifiedBytes, t.relay.features.blobs.store.unverifiedBytes)
      if (at >= bytes.length) return controller.close()
      controller.enqueue(bytes.subarray(at, at + 64 * KiB))
      at += 64 * KiB
    },
  })
  return { body, seen }
}

test('a forged upload larger than the budget writes at most the budget, then only hashes; 401', async () => {
  const t = await relay(256 * KiB)
  const bytes = new Uint8Array(1024 * KiB).fill(7)
  const { body, seen } = watchedBody(t, bytes)
  const req = uploadRequest(t, generateKeyPair(), bytes, { body, signedBytes: new Uint8Array([1]), headers: { 'content-length': String(bytes.length) } })
  const res = await t.handle(req)
  expect(res.status).toBe(401)
  expect((await json(res)).error.code).toBe('invalid_signature')
  expect(seen.unverifiedBytes).toBeGreaterThan(0)
  expect(seen.unverifiedBytes).toBeLessThanOrEqual(256 * KiB)
  expect(seen.tempBytes).toBeLessThanOrEqual(256 * KiB)
  expect(tempBytes(t)).toBe(0)
  expect(t.relay.features.blobs.store.unverifiedBytes).toBe(0)
})

test('a genuine upload within its quota that found the budget full gets 503 with Retry-After; smaller ones are stored', async () => {
  const t = await relay(256 * KiB)
  const c = t.client()
  const big = new Uint8Array(600 * KiB).fill(3)
  const refused = await t.handle(uploadRequest(t, c.transport.keys, big))
  expect(refused.status).toBe(503)
  expect(refused.headers.get('retry-after')).toBe('5')
  expect((await json(refused)).error.code).toBe('service_unavailable')
  expect(tempBytes(t)).toBe(0)

  const small = new Uint8Array(200 * KiB).fill(4)
  const stored = await t.handle(uploadRequest(t, c.transport.keys, small))
  expect(stored.status).toBe(201)
  // once stored, its bytes no longer count: the next one fits again
  expect(t.relay.features.blobs.store.unverifiedBytes).toBe(0)
  expect((await t.handle(uploadRequest(t, c.transport.keys, new Uint8Array(200 * KiB).fill(5)))).status).toBe(201)
})

test('an upload that pauses has what it sent on disk, not in memory, while it waits', async () => {
  const t = await relay(1024 * KiB)
  const store = t.relay.features.blobs.store
  let release = () => {}
  const gate = new Promise<void>((resolve) => (release = resolve))
  let step = 0
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      step++
      if (step <= 4) return controller.enqueue(new Uint8Array(25 * KiB).fill(step))
      await gate
      controller.close()
    },
  })
  const receiving = store.receive(body, { maxBytes: 10 * 1024 * KiB })
  // 100 KiB is far below the write batch: without the pause rule it would wait in memory
  await until(() => tempBytes(t) === 100 * KiB, 3000, 'the paused upload written out')
  expect(store.unverifiedBytes).toBe(100 * KiB)
  release()
  const received = await receiving
  expect(received.size).toBe(100 * KiB)
  await store.discard(received)
  expect(store.unverifiedBytes).toBe(0)
})

test('a client that goes away mid-upload leaves nothing behind and is no unexpected error', async () => {
  const lines: string[] = []
  const t = await startTestRelay({ host: '127.0.0.1' }, { logger: createLogger('info', (l) => lines.push(l)) })
  open.push(t)
  const { port } = await t.relay.start()
  const forged = () => ({
    'X-M2M-Public-Key': randomBytes(32).toString('base64url'),
    'X-M2M-Timestamp': new Date(t.clock.now()).toISOString(),
    'X-M2M-Signature': randomBytes(64).toString('base64url'),
  })
  const cases: [Record<string, string | number>, string][] = [
    [{ 'Content-Length': 1024 * KiB }, 'a'.repeat(100 * KiB)],
    [{ 'Transfer-Encoding': 'chunked' }, `19000\r\n${'a'.repeat(0x19000)}`],
  ]
  for (const [framing, part] of cases) {
    const c = await RawConnection.open(port)
    await c.write(head('POST', '/v1/blobs', { ...forged(), ...framing }))
    await c.write(part)
    await until(() => tempBytes(t) > 0, 3000, 'upload under way')
    c.destroy()
  }
  await until(() => lines.filter((l) => l.includes('"route":"/v1/blobs"') && l.includes('"msg":"request"')).length === 2, 3000, 'both requests logged')
  expect(lines.filter((l) => l.includes('"level":"error"'))).toEqual([])
  expect(lines.filter((l) => l.includes('"status":400')).length).toBe(2)
  expect(tempBytes(t)).toBe(0)
  expect(t.relay.features.blobs.store.unverifiedBytes).toBe(0)
})

test('unverified uploads count against the pre-auth memory budget: strangers are refused before their body once it is full, known keys still get in', async () => {
  const MiB = 1024 * KiB
  // 3 MiB per unverified upload: three from strangers fill their 9 MiB of the 12; the reserve takes one more
  const t = await startTestRelay({ preauth: { memoryBytes: 12 * MiB } })
  open.push(t)
  let release = () => {}
  const gate = new Promise<void>((resolve) => (release = resolve))
  const stalled = () =>
    new ReadableStream<Uint8Array>({
      async pull(controller) {
        controller.enqueue(new Uint8Array(KiB))
        await gate
        controller.close()
      },
    })
  const forged = (keys = generateKeyPair()) =>
    t.handle(uploadRequest(t, keys, new Uint8Array(0), { body: stalled(), signedBytes: randomBytes(16) }))
  const running = [forged(), forged(), forged()]
  await until(() => t.relay.preauth.heldBytes === 9 * MiB, 3000, 'three unverified uploads held')
  const refused = await forged()
  expect(refused.status).toBe(503)
  expect((await json(refused)).error.code).toBe('service_unavailable')
  expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0)

  const known = generateKeyPair()
  await t.client(known).getCapabilities()
  const fromKnown = forged(known)
  await until(() => t.relay.preauth.heldBytes === 12 * MiB, 3000, 'a known key in the reserve')
  release()
  for (const res of await Promise.all([...running, fromKnown])) expect(res.status).toBe(401)
  expect(t.relay.preauth.heldBytes).toBe(0)
})

test('unverified uploads running at once are capped relay-wide and per address, whatever the memory budget; known keys have slots of their own', async () => {
  const { PreAuthBudget, UNVERIFIED_UPLOAD_SLOTS: slots } = await import('../../src/http/preauth.ts')
  const budget = new PreAuthBudget({ memoryBytes: 0, memoryPerAddressBytes: 0, addressPerMin: 0 }, { now: () => 0 })
  const refusal = (f: () => void) => {
    try {
      f()
    } catch (err) {
      const e = err as { status: number; headers?: Record<string, string> }
      return `${e.status} ${e.headers?.['Retry-After'] ? 'retry' : 'no retry'}`
    }
    return 'taken'
  }
  const upload = (address: string | null, claimant: 'known' | 'stranger' = 'stranger') => {
    const hold = budget.open(address, 'body', claimant)
    return { hold, outcome: refusal(() => hold.takeUpload(1)) }
  }
  // per address: past its share of stranger uploads an address is refused (429), another gets in
  const strangers = Array.from({ length: slots.strangersPerAddress }, () => upload('192.0.2.1'))
  expect(upload('192.0.2.1').outcome).toBe('429 retry')
  let n = 2
  while (strangers.length < slots.strangers) strangers.push(upload(`192.0.2.${n++}`))
  expect(strangers.map((s) => s.outcome)).toEqual(Array(slots.strangers).fill('taken'))
  // relay-wide: every stranger slot taken, the next stranger is refused (503) from any address
  expect(upload('198.51.100.1').outcome).toBe('503 retry')
  // known keys, and callers not counted per address (exempt addresses, in process), use the rest
  const known = Array.from({ length: slots.all - slots.strangers - 1 }, (_, i) => upload(`203.0.113.${1 + Math.floor(i / slots.knownPerAddress)}`, 'known'))
  known.push(upload(null))
  expect(known.map((k) => k.outcome)).toEqual(Array(known.length).fill('taken'))
  expect(upload('203.0.113.200', 'known').outcome).toBe('503 retry')
  expect(upload(null).outcome).toBe('503 retry')
  expect(budget.unverifiedUploads).toBe(slots.all)
  // released (verified, refused or answered), a slot is free again, and a refused hold took none;
  // strangers count every upload running, as they do the memory budget
  strangers[0].hold.release()
  strangers[0].hold.release()
  expect(budget.unverifiedUploads).toBe(slots.all - 1)
  expect(upload('192.0.2.1').outcome).toBe('503 retry')
  const another = upload('203.0.113.201', 'known')
  expect(another.outcome).toBe('taken')
  for (const k of [...known, another]) k.hold.release()
  expect(budget.unverifiedUploads).toBe(slots.strangers - 1)
  expect(upload('192.0.2.1').outcome).toBe('taken')
  for (const u of strangers.slice(1)) u.hold.release()
  expect(budget.unverifiedUploads).toBe(1)
})

test('an upload that arrives slower than the minimum body rate is cut with 408 and gives back its slot and budget', async () => {
  const t = await startTestRelay()
  open.push(t)
  let sent = 0
  // 1 KiB, then a byte a second: a slot held for as long as the client likes, were there no minimum rate
  const crawling = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (sent > 0) await Bun.sleep(1000)
      controller.enqueue(new Uint8Array(sent === 0 ? KiB : 1))
      sent++
    },
  })
  const pending = t.handle(uploadRequest(t, generateKeyPair(), new Uint8Array(0), { body: crawling, signedBytes: randomBytes(16) }))
  await until(() => t.relay.preauth.unverifiedUploads === 1, 3000, 'the upload holds a slot')
  const res = await pending
  expect(res.status).toBe(408)
  expect((await json(res)).error.code).toBe('request_timeout')
  expect(t.relay.preauth.unverifiedUploads).toBe(0)
  expect(t.relay.preauth.heldBytes).toBe(0)
  expect(tempBytes(t)).toBe(0)
})
