/**
 * End-to-end encryption through a real relay (in process, real SQLite file and blob directory): what
 * the client encrypts by the recipients' declarations, what every receive path hands over, encrypted
 * attachments, and the relay's encrypted-only inboxes.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createHash, createHmac } from 'node:crypto'
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, watch, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { ENCRYPTED_CONTENT_TYPE, RelayApiError, RelayClient, verifyWebhook } from '../../src/client/index.ts'
import { startTestRelay, type TestRelay } from '../support/harness.ts'
import { startWsRelay, type WsRelay } from '../realtime/helpers.ts'
import { until } from '../support/ws.ts'
import { expectNoMarkerIn } from '../support/disk.ts'
import { CONTENT_GRACE_MS } from '../../src/services/blobs.ts'

const UNLIMITED = { rateLimits: { sendPerMin: 0, pollPerMin: 0, requestsPerMin: 0 } }
let t: TestRelay
beforeAll(async () => {
  t = await startTestRelay(UNLIMITED)
})
afterAll(() => t.close())

const raw = (c: RelayClient) => new RelayClient({ baseUrl: 'http://relay.test', keys: c.transport.keys, fetch: (req) => t.relay.handle(req), now: () => t.clock.now(), encryption: { decrypt: false } })

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    return statSync(path).isDirectory() ? filesUnder(path) : [path]
  })
}

describe('sending by the declaration', () => {
  test('to an agent that declares it: v3, stored as ciphertext, received as plaintext with the facts', async () => {
    const alice = t.client()
    const bob = t.client()
    await bob.declareEncryption()
    expect((await bob.getAgent()).metadata.encryption).toEqual({ versions: [3, 2], require: false })
    const sent = await alice.send({ recipient_key: bob.publicKey, body: { secret: 'marker-v3-declared' } })
    const stored = await raw(bob).getMessage(sent.message_id)
    expect(stored.content_type).toBe(ENCRYPTED_CONTENT_TYPE)
    expect((stored.body as { v: number }).v).toBe(3)
    expect(JSON.stringify(stored)).not.toContain('marker')
    const got = await bob.getMessage(sent.message_id)
    expect(got).toMatchObject({ content_type: 'application/json', body: { secret: 'marker-v3-declared' }, encryption: { version: 3, sender_verified: true } })
  })

  test('to one that declares nothing: plaintext, unless asked (v2, what MRP agents read) or with a version', async () => {
    const alice = t.client()
    const carol = t.client()
    await carol.getAgent()
    const plain = await alice.send({ recipient_key: carol.publicKey, body: 'hi' })
    expect((await raw(carol).getMessage(plain.message_id)).content_type).toBe('application/json')
    const asked = await alice.send({ recipient_key: carol.publicKey, content_type: 'text/plain', body: 'hi', encrypt: true })
    const stored = await raw(carol).getMessage(asked.message_id)
    expect(stored.body).toMatchObject({ v: 2, ct_content_type: 'text/plain' })
    expect(await carol.getMessage(asked.message_id)).toMatchObject({ body: 'hi', content_type: 'text/plain', encryption: { version: 2, sender_verified: true } })
    const v3 = await alice.send({ recipient_key: carol.publicKey, body: 'hi', encrypt: 3 })
    expect((await raw(carol).getMessage(v3.message_id)).body).toMatchObject({ v: 3 })
  })

  test('plain: true sends plaintext even to an agent that declares encryption', async () => {
    const alice = t.client()
    const bob = t.client()
    await bob.declareEncryption()
    const sent = await alice.send({ recipient_key: bob.publicKey, body: 'open', plain: true })
    const got = await bob.getMessage(sent.message_id)
    expect(got.body).toBe('open')
    expect(got.encryption).toBeUndefined()
  })
})

describe('encrypted-only inboxes', () => {
  test('the relay refuses a plaintext send with 422 encryption_required and accepts an encrypted one', async () => {
    const alice = t.client()
    const bob = t.client()
    await bob.declareEncryption({ require: true })
    const err = await alice.send({ recipient_key: bob.publicKey, body: 'x', plain: true }).catch((e) => e)
    expect(err).toBeInstanceOf(RelayApiError)
    expect(err).toMatchObject({ status: 422, code: 'encryption_required', details: { required_by: 'recipient' } })
    // a fake envelope of the right content type but the wrong shape is refused too
    const fake = await alice.send({ recipient_key: bob.publicKey, content_type: ENCRYPTED_CONTENT_TYPE, body: { text: 'x' } }).catch((e) => e)
    expect(fake).toMatchObject({ status: 422, code: 'encryption_required' })
    const ok = await alice.send({ recipient_key: bob.publicKey, body: 'sealed' })
    expect((await bob.getMessage(ok.message_id)).body).toBe('sealed')
  })

  test('a private agent that requires encryption: a send that asks for nothing arrives encrypted, its sender verified', async () => {
    const alice = t.client()
    const dave = t.client()
    await dave.updateProfile({ visibility: 'private' })
    await dave.declareEncryption({ require: true })
    const sent = await alice.send({ recipient_key: dave.publicKey, body: 'after refusal' })
    const got = await dave.getMessage(sent.message_id)
    expect(got).toMatchObject({ body: 'after refusal', encryption: { sender_verified: true } })
  })

  test('plaintext attachments to such an inbox are refused', async () => {
    const alice = t.client()
    const bob = t.client()
    await bob.declareEncryption({ require: true })
    const blob = await alice.uploadBlob(new TextEncoder().encode('plain file'))
    const err = await alice.send({ recipient_key: bob.publicKey, attachments: [{ blob_id: blob.blob_id }] }).catch((e) => e)
    expect(err).toMatchObject({ status: 422, code: 'encryption_required' })
  })

  test('encrypted attachments without an encrypted body, or a plaintext attachment beside one, are refused (§14.6)', async () => {
    const alice = t.client()
    const bob = t.client()
    await bob.declareEncryption({ require: true })
    const up = await alice.uploadEncryptedBlob(new TextEncoder().encode('a file'), { recipientKey: bob.publicKey })
    const bodyless = await alice.send({ recipient_key: bob.publicKey, attachments: [up.attachment], plain: true }).catch((e) => e)
    expect(bodyless).toBeInstanceOf(RelayApiError)
    expect(bodyless).toMatchObject({ status: 422, code: 'encryption_required', details: { required_by: 'recipient' } })
    expect(bodyless.message).toContain('encrypted body')
    const open = await alice.uploadBlob(new TextEncoder().encode('plain file'))
    const sealed = alice.encryption.seal({ recipient_key: bob.publicKey, body: 'x', attachments: [up.attachment] }, 3)
    const mixed = await alice.send({ ...sealed, attachments: [up.attachment, { blob_id: open.blob_id }] }).catch((e) => e)
    expect(mixed).toMatchObject({ status: 422, code: 'encryption_required', details: { required_by: 'recipient' } })
    expect(mixed.message).toContain('attachments[1]')
    // the same attachment-only send, sealed as the client does it by itself, passes
    const ok = await alice.send({ recipient_key: bob.publicKey, attachments: [up.attachment] })
    expect(await bob.getMessage(ok.message_id)).toMatchObject({ body: null, encryption: { version: 3, sender_verified: true } })
  })

  test('a refused plaintext attempt: the blobs its uploads created are deleted, one the sender already owned is kept', async () => {
    const alice = t.client()
    const bob = t.client()
    await bob.getAgent()
    // alice reads bob's profile before bob asks for encryption: her first attempt goes in plaintext
    expect(await alice.encryption.declarationOf(bob.publicKey)).toBeNull()
    await bob.declareEncryption({ require: true })
    const marker = 'REFUSED-PLAINTEXT-MARKER-upload'
    const fresh = new TextEncoder().encode(`${marker} fresh`)
    const owned = new TextEncoder().encode('content alice uploaded before')
    const ownedBlob = await alice.uploadBlob(owned)
    const plaintextTry: string[] = []
    // what relay send --attach does: upload in the attempt, plaintext or encrypted for the version
    const { version } = await alice.encryption.sendWithFallback(bob.publicKey, {}, async (version) => {
      const attachments = []
      for (const bytes of [fresh, owned]) {
        if (version) attachments.push((await alice.uploadEncryptedBlob(bytes, { recipientKey: bob.publicKey, version })).attachment)
        else {
          const blob = await alice.uploadBlob(bytes)
          plaintextTry.push(blob.blob_id)
          attachments.push({ blob_id: blob.blob_id })
        }
      }
      return alice.send({ recipient_key: bob.publicKey, attachments, encrypt: version ?? false })
    })
    expect(version).toBe(3)
    const [freshId, ownedAgain] = plaintextTry
    // the second upload of owned content answered 200 with alice's existing blob
    expect(ownedAgain).toBe(ownedBlob.blob_id)
    expect(await alice.blobInfo(freshId!).catch((e) => e)).toMatchObject({ status: 404 })
    expect(await alice.downloadBlob(freshId!).catch((e) => e)).toMatchObject({ status: 404, code: 'blob_not_found' })
    expect(await alice.blobInfo(ownedBlob.blob_id)).toMatchObject({ size: owned.length })
    // the bytes of a deleted record go with the blob sweep, past the grace an upload of the same content has
    t.clock.advance(CONTENT_GRACE_MS + 1000)
    await t.relay.features.blobs.sweeper.runOnce(t.clock.now())
    expectNoMarkerIn(filesUnder(join(t.dataDir, 'blobs')), marker)
    expect(await alice.blobInfo(ownedBlob.blob_id)).toMatchObject({ size: owned.length })
  })

  test('relay-wide (messages.requireEncryption): every plaintext send is refused, encrypted ones pass', async () => {
    const strict = await startTestRelay({ ...UNLIMITED, messages: { requireEncryption: true } })
    try {
      const alice = strict.client()
      const bob = strict.client()
      await bob.getAgent()
      const err = await alice.send({ recipient_key: bob.publicKey, body: 'x', plain: true }).catch((e) => e)
      expect(err).toMatchObject({ status: 422, code: 'encryption_required', details: { required_by: 'relay' } })
      const ok = await alice.send({ recipient_key: bob.publicKey, body: 'x', encrypt: true })
      expect((await bob.getMessage(ok.message_id)).body).toBe('x')
      // encrypted attachments alone are not an encrypted message: the body that signs them is missing
      const up = await alice.uploadEncryptedBlob(new TextEncoder().encode('a file'), { recipientKey: bob.publicKey, version: 2 })
      const bodyless = await alice.send({ recipient_key: bob.publicKey, attachments: [up.attachment], plain: true }).catch((e) => e)
      expect(bodyless).toMatchObject({ status: 422, code: 'encryption_required', details: { required_by: 'relay' } })
    } finally {
      await strict.close()
    }
  })
})

describe('what arrives', () => {
  test('poll and thread decrypt; a tampered message comes back marked with the reason, not thrown', async () => {
    const alice = t.client()
    const bob = t.client()
    await bob.declareEncryption()
    const good = await alice.send({ recipient_key: bob.publicKey, body: 'one', thread_id: 'th-enc' })
    const sealed = alice.encryption.seal({ recipient_key: bob.publicKey, body: 'two' }, 3)
    const ct = Buffer.from((sealed.body as { ct: string }).ct, 'base64url')
    ct[10]! ^= 1
    const bad = await alice.send({ ...sealed, body: { ...(sealed.body as object), ct: ct.toString('base64url') }, thread_id: 'th-enc' })
    const page = await bob.thread('th-enc')
    const byId = Object.fromEntries(page.messages.map((m) => [m.message_id, m]))
    expect(byId[good.message_id]).toMatchObject({ body: 'one', encryption: { version: 3, sender_verified: true } })
    expect(byId[bad.message_id]!.content_type).toBe(ENCRYPTED_CONTENT_TYPE)
    expect(byId[bad.message_id]!.encryption).toMatchObject({ version: 3, sender_verified: false, error: { reason: 'authentication_failed' } })
    const polled = await bob.poll()
    // both were sent in the same millisecond of the fake clock: their order is not fixed
    expect(polled.messages.map((m) => m.encryption?.error?.reason ?? m.body).sort()).toEqual(['authentication_failed', 'one'])
  })

  test('the webhook helper decrypts when given the keys', async () => {
    const alice = generateKeyPair()
    const bob = generateKeyPair()
    const client = new RelayClient({ baseUrl: 'http://unused', keys: alice })
    const sealed = client.encryption.seal({ recipient_key: bob.publicKey, body: { n: 1 } }, 2)
    const delivery = { delivery_id: 'd1', message: { message_id: 'm1', sender_key: alice.publicKey, ...sealed, attachments: [], created_at: 'x', expires_at: 'x' } }
    const rawBody = JSON.stringify(delivery)
    const secret = Buffer.alloc(32, 7)
    const headers = { 'x-m2m-webhook-signature': createHmac('sha256', secret).update(rawBody).digest('hex'), 'x-m2m-webhook-timestamp': new Date().toISOString() }
    const plain = await verifyWebhook({ rawBody, headers, secret: secret.toString('base64url') })
    expect(plain.message.content_type).toBe(ENCRYPTED_CONTENT_TYPE)
    const opened = await verifyWebhook({ rawBody, headers, secret: secret.toString('base64url'), keys: bob })
    expect(opened.message).toMatchObject({ body: { n: 1 }, encryption: { version: 2, sender_verified: true } })
    const wrong = await verifyWebhook({ rawBody, headers, secret: secret.toString('base64url'), keys: generateKeyPair() })
    expect((wrong.message as { encryption?: { error?: { reason: string } } }).encryption?.error?.reason).toBe('bad_key')
  })
})

describe('encrypted attachments', () => {
  for (const size of [0, 1, 200_000]) {
    test(`${size} bytes: uploaded as ciphertext, stored without the plaintext, downloaded and decrypted`, async () => {
      const alice = t.client()
      const bob = t.client()
      await bob.declareEncryption()
      const marker = 'PLAINTEXT-MARKER-attachment'
      const plain = new Uint8Array(size)
      for (let i = 0; i < size; i++) plain[i] = marker.charCodeAt(i % marker.length)
      const up = await alice.uploadEncryptedBlob(plain, { recipientKey: bob.publicKey })
      expect(up.plain_size).toBe(size)
      expect(up.blob.size).toBe(17 + size + 16 * Math.max(1, Math.ceil(size / 65536)))
      const sent = await alice.send({ recipient_key: bob.publicKey, body: 'see attached', attachments: [up.attachment] })
      const msg = await bob.getMessage(sent.message_id)
      expect(msg.encryption).toMatchObject({ version: 3, sender_verified: true })
      const att = msg.attachments![0]!
      expect(att).toMatchObject({ encrypted: true, size: up.blob.size })
      // no file name goes with an encrypted attachment: the relay would see it (§14.5)
      expect(up.attachment).not.toHaveProperty('filename')
      expect(att.filename).toBeUndefined()
      const got = new Uint8Array(await new Response(await bob.downloadDecrypted(msg, att)).arrayBuffer())
      expect(Buffer.from(got).equals(Buffer.from(plain))).toBe(true)
      if (size >= marker.length) {
        for (const file of filesUnder(t.dataDir)) expect(readFileSync(file).includes(marker)).toBe(false)
      }
    })
  }

  test('a file, a Blob and a one-shot stream: the same plaintext arrives; only the stream spools (ciphertext) to a temporary file', async () => {
    const alice = t.client()
    const bob = t.client()
    await bob.declareEncryption()
    const work = mkdtempSync(join(tmpdir(), 'relay-enc-src-'))
    const spool = mkdtempSync(join(tmpdir(), 'relay-enc-spool-'))
    const before = process.env.TMPDIR
    try {
      const marker = 'PLAINTEXT-MARKER-sources'
      // three segments and a bit: full segments, a short last one
      const plain = new Uint8Array(3 * 65536 + 777)
      for (let i = 0; i < plain.length; i++) plain[i] = marker.charCodeAt(i % marker.length)
      const source = join(work, 'plain.bin')
      writeFileSync(source, plain)
      // the spool directory of the client is TMPDIR: watched while each upload runs
      process.env.TMPDIR = spool
      const seen = new Set<string>()
      const watcher = watch(spool, (_event, name) => name && seen.add(name))
      const progress: number[] = []
      const uploads = {
        file: await alice.uploadEncryptedBlob(source, { recipientKey: bob.publicKey, onProgress: (n) => progress.push(n) }),
        blob: await alice.uploadEncryptedBlob(Bun.file(source), { recipientKey: bob.publicKey }),
      }
      // progress counts the ciphertext sent, rising to the stored size
      expect(progress.length).toBeGreaterThan(0)
      expect(progress.every((n, i) => i === 0 || n > progress[i - 1]!)).toBe(true)
      expect(progress.at(-1)).toBe(uploads.file.blob.size)
      await Bun.sleep(50)
      expect([...seen]).toEqual([])
      expect(readdirSync(work)).toEqual(['plain.bin'])
      const stream = await alice.uploadEncryptedBlob(new Blob([plain]).stream(), { recipientKey: bob.publicKey })
      await Bun.sleep(50)
      watcher.close()
      expect(seen.size).toBe(1)
      expect(readdirSync(spool)).toEqual([])
      process.env.TMPDIR = before
      for (const [kind, up] of Object.entries({ ...uploads, stream })) {
        expect({ kind, size: up.plain_size }).toEqual({ kind, size: plain.length })
        expect(up.blob.size).toBe(17 + plain.length + 16 * 4)
        const sent = await alice.send({ recipient_key: bob.publicKey, body: kind, attachments: [up.attachment] })
        const msg = await bob.getMessage(sent.message_id)
        const out = join(work, `out-${kind}.bin`)
        const written = await bob.downloadDecryptedToFile(msg, msg.attachments![0]!, out)
        expect(written.size).toBe(plain.length)
        expect(written.sha256).toBe(createHash('sha256').update(plain).digest('hex'))
        expect(readFileSync(out).equals(Buffer.from(plain))).toBe(true)
      }
      // a fresh key and salt each time: three different ciphertexts of one plaintext
      expect(new Set(Object.values({ ...uploads, stream }).map((u) => u.blob.hash)).size).toBe(3)
      for (const file of filesUnder(t.dataDir)) expect(readFileSync(file).includes(marker)).toBe(false)
    } finally {
      if (before === undefined) delete process.env.TMPDIR
      else process.env.TMPDIR = before
      rmSync(work, { recursive: true, force: true })
      rmSync(spool, { recursive: true, force: true })
    }
  })

  test('a changed byte in the stored blob: the download to a file fails and leaves no file behind', async () => {
    const alice = t.client()
    const bob = t.client()
    await bob.declareEncryption()
    const up = await alice.uploadEncryptedBlob(crypto.getRandomValues(new Uint8Array(300_000)), { recipientKey: bob.publicKey })
    const sent = await alice.send({ recipient_key: bob.publicKey, body: 'x', attachments: [up.attachment] })
    const msg = await bob.getMessage(sent.message_id)
    const stored = filesUnder(join(t.dataDir, 'blobs')).find((f) => statSync(f).size === up.blob.size)
    expect(stored).toBeDefined()
    const bytes = readFileSync(stored!)
    bytes[200_000]! ^= 1
    await Bun.write(stored!, bytes)
    const work = mkdtempSync(join(tmpdir(), 'relay-enc-down-'))
    try {
      const err = await bob.downloadDecryptedToFile(msg, msg.attachments![0]!, join(work, 'out.bin')).catch((e) => e)
      expect(err).toMatchObject({ name: 'DecryptError', reason: 'authentication_failed' })
      expect(readdirSync(work)).toEqual([])
    } finally {
      rmSync(work, { recursive: true, force: true })
    }
  })

  test('a changed byte in the stored blob: the download stream errors with a reason', async () => {
    const alice = t.client()
    const bob = t.client()
    await bob.declareEncryption()
    const up = await alice.uploadEncryptedBlob(crypto.getRandomValues(new Uint8Array(5000)), { recipientKey: bob.publicKey })
    const sent = await alice.send({ recipient_key: bob.publicKey, body: 'x', attachments: [up.attachment] })
    const msg = await bob.getMessage(sent.message_id)
    const stored = filesUnder(join(t.dataDir, 'blobs')).find((f) => statSync(f).size === up.blob.size && readFileSync(f).subarray(0, 17).equals(Buffer.from([])) === false)
    expect(stored).toBeDefined()
    const bytes = readFileSync(stored!)
    bytes[100]! ^= 1
    await Bun.write(stored!, bytes)
    const err = await new Response(await bob.downloadDecrypted(msg, msg.attachments![0]!)).arrayBuffer().catch((e) => e)
    expect(err).toMatchObject({ name: 'DecryptError', reason: 'authentication_failed' })
  })
})

describe('listen', () => {
  let r: WsRelay
  beforeAll(async () => {
    r = await startWsRelay(UNLIMITED)
  })
  afterAll(() => r.t.close())

  test('hands over decrypted messages, and a broken one marked, without stopping', async () => {
    const baseUrl = `http://127.0.0.1:${r.port}`
    const bob = new RelayClient({ baseUrl, keys: generateKeyPair(), now: () => r.t.clock.now() })
    const alice = r.t.client()
    const got: unknown[] = []
    const stop = new AbortController()
    const done = bob.listen({ signal: stop.signal, onMessage: (m) => void got.push(m.encryption?.error?.reason ?? m.body) })
    await until(() => r.t.relay.features.realtime.hub.connectionsOf(bob.publicKey).length === 1, 3000, 'a connection')
    await alice.send({ recipient_key: bob.publicKey, content_type: ENCRYPTED_CONTENT_TYPE, body: { v: 3, enc: 'AAAA', ct: 'AAAA' } })
    await alice.send({ recipient_key: bob.publicKey, body: 'sealed', encrypt: 3 })
    await until(() => got.length === 2)
    expect(got).toEqual(['malformed', 'sealed'])
    stop.abort()
    await done
  })
})
