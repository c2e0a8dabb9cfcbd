/**
 * Who wrapped an encrypted attachment's key (docs/protocol.md §14.5): the client opens an attachment
 * only when the message's encrypted body vouches for it (v3: its signature covers the wrapped key; v2:
 * the key is wrapped in HPKE Auth mode), or, with no encrypted body, when HPKE Auth mode itself names
 * the sender. An operator who re-wraps a key of its own in Base mode and swaps the blob is refused.
 *
 * The operator's forgery is played here by editing what the relay serves: the message's attachment entry
 * (as a changed database row would read) and the blob file on disk.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { writeFileSync } from 'node:fs'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { bindEncryption } from '../../src/crypto/index.ts'
import { nativePrimitives } from '../../src/crypto/native.ts'
import { RelayClient, type AttachmentJson, type EncryptionVersion, type ReceivedMessageJson } from '../../src/client/index.ts'
import { startTestRelay, type TestRelay } from '../support/harness.ts'
import { blobFileOf } from '../support/disk.ts'
import { wrapDekV2 } from '../support/independent-hpke.ts'
import { writeEncryptedBlob } from '../support/independent-blob.ts'

const UNLIMITED = { rateLimits: { sendPerMin: 0, pollPerMin: 0, requestsPerMin: 0 } }
let t: TestRelay
beforeAll(async () => {
  t = await startTestRelay(UNLIMITED)
})
afterAll(() => t.close())

const e2e = bindEncryption(nativePrimitives)
const text = (s: string) => new TextEncoder().encode(s)
const raw = (c: RelayClient) => new RelayClient({ baseUrl: 'http://relay.test', keys: c.transport.keys, fetch: (req) => t.relay.handle(req), now: () => t.clock.now(), encryption: { decrypt: false } })
const read = async (s: ReadableStream<Uint8Array>) => new TextDecoder().decode(await new Response(s).arrayBuffer())

/**
 * The operator's forgery of `attachment` for `recipientKey`: a DEK of its own wrapped in Base mode (no
 * sender key needed), and the stored blob overwritten with the forged text under it. Returns the entry
 * the relay would then serve.
 */
async function forge(attachment: AttachmentJson, recipientKey: string, forged: string): Promise<AttachmentJson> {
  const dek = e2e.newDek()
  const wrapped = e2e.wrapDek({ version: 3, dek, sender: generateKeyPair(), recipientKey })
  // as long as the real file, so the blob keeps its stored size
  const plainBytes = attachment.size - 17 - 16
  writeFileSync(blobFileOf(t.dataDir, attachment.hash), await e2e.encryptBlob(dek, text(forged.padEnd(plainBytes, '!').slice(0, plainBytes))))
  return { ...attachment, ...wrapped }
}

/** Alice's message with one encrypted attachment to a fresh Bob: `version` null sends no encrypted body. */
async function sendWithFile(version: EncryptionVersion | null, secret: string) {
  const alice = t.client()
  const bob = t.client()
  await bob.getAgent()
  const up = await alice.uploadEncryptedBlob(text(secret), { recipientKey: bob.publicKey, version: version ?? 3 })
  const sent = version
    ? await alice.send({ recipient_key: bob.publicKey, body: 'see attached', attachments: [up.attachment], encrypt: version })
    : await alice.send({ recipient_key: bob.publicKey, attachments: [up.attachment], plain: true })
  return { alice, bob, sent, stored: await raw(bob).getMessage(sent.message_id) }
}

async function refusal(bob: RelayClient, message: Parameters<RelayClient['downloadDecrypted']>[0], attachment: AttachmentJson) {
  const err = await bob
    .downloadDecrypted(message, attachment)
    .then(read)
    .catch((e) => e)
  return err
}

describe('a forged attachment is refused', () => {
  test('no encrypted body: a key wrapped in Base mode is not opened, forged or not', async () => {
    const { bob, stored } = await sendWithFile(null, 'the real file, long enough to forge')
    const genuine = stored.attachments[0]!
    expect(await refusal(bob, stored, genuine)).toMatchObject({ name: 'DecryptError', reason: 'unauthenticated' })
    const forged = await forge(genuine, bob.publicKey, 'FORGED by the operator')
    const served = { ...stored, attachments: [forged] }
    expect(await refusal(bob, served, forged)).toMatchObject({ name: 'DecryptError', reason: 'unauthenticated' })
  })

  test('a v3 message: the swapped key is not the one signed; the body does not open and the attachment is refused', async () => {
    const { bob, stored } = await sendWithFile(3, 'the real file, long enough to forge')
    const forged = await forge(stored.attachments[0]!, bob.publicKey, 'FORGED by the operator')
    const served = { ...stored, attachments: [forged] }
    const opened = bob.encryption.open(served)
    expect(opened.encryption).toMatchObject({ version: 3, sender_verified: false, error: { reason: 'bad_signature' } })
    expect(await refusal(bob, opened, forged)).toMatchObject({ name: 'DecryptError', reason: 'unauthenticated' })
    // handed the envelope as served, unopened: the client opens it first and refuses the same way
    expect(await refusal(bob, served, forged)).toMatchObject({ name: 'DecryptError', reason: 'unauthenticated' })
  })

  test('a v3 message that opened: an attachment entry it does not carry is refused', async () => {
    const { bob, sent } = await sendWithFile(3, 'the real file, long enough to forge')
    const msg = await bob.getMessage(sent.message_id)
    expect(msg.encryption).toMatchObject({ version: 3, sender_verified: true })
    const stranger = { ...msg.attachments[0]!, ...e2e.wrapDek({ version: 3, dek: e2e.newDek(), sender: generateKeyPair(), recipientKey: bob.publicKey }) }
    expect(await refusal(bob, msg, stranger)).toMatchObject({ name: 'DecryptError', reason: 'unauthenticated' })
  })

  test('a v2 message, which signs no attachment: a key wrapped in Base mode is refused', async () => {
    const { bob, sent } = await sendWithFile(2, 'the real file, long enough to forge')
    const msg = await bob.getMessage(sent.message_id)
    expect(msg.encryption).toMatchObject({ version: 2, sender_verified: true })
    const forged = await forge(msg.attachments[0]!, bob.publicKey, 'FORGED by the operator')
    expect(await refusal(bob, { ...msg, attachments: [forged] }, forged)).toMatchObject({ name: 'DecryptError', reason: 'unauthenticated' })
  })
})

describe('genuine attachments open', () => {
  test('an attachment-only send to an agent that declares v3 goes sealed and arrives sender verified', async () => {
    const alice = t.client()
    const bob = t.client()
    await bob.declareEncryption()
    const up = await alice.uploadEncryptedBlob(text('only a file'), { recipientKey: bob.publicKey })
    const sent = await alice.send({ recipient_key: bob.publicKey, attachments: [up.attachment] })
    const stored = await raw(bob).getMessage(sent.message_id)
    expect(stored.body).toMatchObject({ v: 3 })
    const msg: ReceivedMessageJson = await bob.getMessage(sent.message_id)
    expect(msg).toMatchObject({ body: null, encryption: { version: 3, sender_verified: true } })
    expect(await read(await bob.downloadDecrypted(msg, msg.attachments[0]!))).toBe('only a file')
  })

  test('an attachment-only v2 message with its key wrapped in HPKE Auth mode (an independent implementation) opens', async () => {
    const alice = t.client()
    const bob = t.client()
    await bob.getAgent()
    const dek = crypto.getRandomValues(new Uint8Array(32))
    const blob = await alice.uploadBlob(await writeEncryptedBlob(dek, text('from an MRP agent')))
    const attachment = { blob_id: blob.blob_id, encrypted: true, ...(await wrapDekV2(alice.transport.keys, bob.publicKey, dek)) }
    const sent = await alice.send({ recipient_key: bob.publicKey, attachments: [attachment], plain: true })
    const msg = await bob.getMessage(sent.message_id)
    expect(msg.encryption).toBeUndefined()
    expect(await read(await bob.downloadDecrypted(msg, msg.attachments[0]!))).toBe('from an MRP agent')
  })
})
