/**
 * relay_download of a tampered encrypted attachment, against the compiled binary: a changed byte in the
 * relay's blob file, or a wrapped data key changed on the way (v2, which nothing else covers; v3, whose
 * signature covers it), gives a tool error that names the decryption failure and its reason — no file
 * written, no partial file left, no plaintext — and the bridge keeps working.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { RelayClient, type EncryptionVersion } from '../../src/client/index.ts'
import { decodeBase64Url, encodeBase64Url } from '../../src/lib/base64url.ts'
import { startBinary, tempDataDir, type RunningRelay } from '../e2e/binary.ts'
import { blobFileOf } from '../support/disk.ts'
import { tempDir } from '../support/harness.ts'
import { call, newAgent, ok, stdioBridge, textOf, untilPending, type Agent, type Bridge } from './helpers.ts'

const MARKER = 'MCP-TAMPER-MARKER-8e2d'
let relay: RunningRelay
let dataDir: string
let dir: string
let alice: RelayClient
let bob: Agent
let b: Bridge

beforeAll(async () => {
  dataDir = tempDataDir()
  relay = await startBinary(dataDir)
  dir = tempDir('relay-mcp-tamper-')
  alice = new RelayClient({ baseUrl: relay.url, keys: newAgent(dir, 'alice').keys })
  bob = newAgent(dir, 'bob')
  // bob's bridge publishes that he reads encrypted messages
  b = await stdioBridge({ relayUrl: relay.url, agent: bob, cwd: dir })
  await ok(b, 'relay_whoami')
}, 120_000)

afterAll(async () => {
  await b?.close().catch(() => {})
  await relay?.stop()
  rmSync(dir, { recursive: true, force: true })
  rmSync(dataDir, { recursive: true, force: true })
})

/**
 * Sends bob a message with one encrypted 200 KB attachment (`tamperKey` flips a byte of its wrapped
 * key on the way); returns it and the blob's file on disk.
 */
async function sendOne(tag: string, version: EncryptionVersion, tamperKey = false): Promise<{ messageId: string; blobId: string; blobFile: string; plain: Buffer }> {
  const plain = Buffer.alloc(200_000, `${MARKER} ${tag} `)
  const up = await alice.uploadEncryptedBlob(plain, { recipientKey: bob.keys.publicKey, version })
  const sealed = alice.encryption.seal({ recipient_key: bob.keys.publicKey, body: { text: tag }, attachments: [up.attachment] }, version)
  if (tamperKey) {
    // after sealing: as the relay or anyone between could
    const dekCt = decodeBase64Url(up.attachment.dek_ct)!
    dekCt[5] ^= 0x01
    sealed.attachments = [{ ...up.attachment, dek_ct: encodeBase64Url(dekCt) }]
  }
  const sent = await alice.send(sealed)
  return { messageId: sent.message_id, blobId: up.blob.blob_id, blobFile: blobFileOf(dataDir, up.blob.hash), plain }
}

/** relay_download must fail, write nothing into the files directory, and leave the bridge working; returns the error text. */
async function expectRefused(messageId: string, blobId: string): Promise<string> {
  const before = readdirSync(dir).sort()
  const r = await call(b, 'relay_download', { blob_id: blobId, message_id: messageId, path: 'out.bin' })
  expect(r.isError).toBe(true)
  const text = textOf(r)
  expect(text).not.toContain(MARKER)
  expect(readdirSync(dir).sort()).toEqual(before)
  // still answering, the message still there to try again
  const inbox = await ok(b, 'relay_inbox', { limit: 100 })
  expect(inbox.messages.map((m: { message_id: string }) => m.message_id)).toContain(messageId)
  return text
}

describe('relay_download of a tampered encrypted attachment', () => {
  test('a changed byte in the stored blob: authentication_failed; the untouched blob downloads', async () => {
    const { messageId, blobId, blobFile, plain } = await sendOne('flipped', 3)
    await untilPending(b, 1)
    const good = await ok(b, 'relay_download', { blob_id: blobId, message_id: messageId, path: 'good.bin' })
    expect(good.decrypted).toBe(true)
    expect(readFileSync(join(dir, 'good.bin')).equals(plain)).toBe(true)
    rmSync(join(dir, 'good.bin'))

    const bytes = readFileSync(blobFile)
    bytes[bytes.length - 100] ^= 0x01
    writeFileSync(blobFile, bytes)
    const text = await expectRefused(messageId, blobId)
    expect(text).toStartWith('Decryption failed (authentication_failed): ')
  }, 60_000)

  test('v2, a wrapped key changed on the way: the message opens, its attachment does not', async () => {
    const { messageId, blobId } = await sendOne('v2-key', 2, true)
    const inbox = await untilPending(b, 2)
    expect(inbox.messages.find((m: { message_id: string }) => m.message_id === messageId).encryption).toMatchObject({ version: 2, sender_verified: true })
    const text = await expectRefused(messageId, blobId)
    expect(text).toStartWith('Decryption failed (authentication_failed): ')
  }, 60_000)

  test('v3, a wrapped key changed on the way: the signature covers it, so the message says why it does not open', async () => {
    const { messageId, blobId } = await sendOne('v3-key', 3, true)
    const inbox = await untilPending(b, 3)
    expect(inbox.messages.find((m: { message_id: string }) => m.message_id === messageId).encryption.error.reason).toBe('bad_signature')
    const text = await expectRefused(messageId, blobId)
    expect(text).toContain(`message ${messageId} was not decrypted (bad_signature)`)
  }, 60_000)
})
