/**
 * `relay mcp` end to end encrypted, against the compiled binary: relay_send / relay_reply encrypt the
 * body and uploaded files for a recipient that declares it (and only then, unless encrypt says
 * otherwise), sending encrypted files without their names; a plaintext send an encrypted-only inbox
 * refuses goes again encrypted, files included; relay_inbox, relay_wait, relay_get_message and
 * relay_thread return the plaintext with `encryption` facts; relay_download decrypts; a message that
 * does not open says why; relay_whoami reports it; and the relay's data directory never holds the
 * plaintext.
 */
import { Database } from 'bun:sqlite'
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { basename, join } from 'node:path'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { bindEncryption, nativePrimitives, RelayClient } from '../../src/client/index.ts'
import { startBinary, tempDataDir, type RunningRelay } from '../e2e/binary.ts'
import { expectNoMarkerUnder } from '../support/disk.ts'
import { tempDir } from '../support/harness.ts'
import { call, newAgent, ok, stdioBridge, textOf, untilPending, type Agent, type Bridge } from './helpers.ts'

const MARKER = 'MCP-PLAINTEXT-MARKER-3d71'
let relay: RunningRelay
let dataDir: string
let dir: string
let alice: Agent
let bob: Agent
let a: Bridge
let b: Bridge

/** The attachments of a message as the relay stored them (the row in relay.db). */
function storedAttachments(messageId: string): Record<string, unknown>[] {
  const db = new Database(join(dataDir, 'relay.db'), { readonly: true })
  try {
    const row = db.query('SELECT attachments FROM messages WHERE message_id = ?').get(messageId) as { attachments: string }
    return JSON.parse(row.attachments)
  } finally {
    db.close()
  }
}

beforeAll(async () => {
  dataDir = tempDataDir()
  relay = await startBinary(dataDir)
  dir = tempDir('relay-mcp-enc-')
  alice = newAgent(dir, 'alice')
  bob = newAgent(dir, 'bob')
  // bob reads encrypted messages; alice declares nothing (her bridge is told not to publish it)
  await new RelayClient({ baseUrl: relay.url, keys: bob.keys }).declareEncryption()
  ;[a, b] = await Promise.all([
    stdioBridge({ relayUrl: relay.url, agent: alice, cwd: dir, env: { RELAY_PUBLISH_ENCRYPTION: 'false' } }),
    stdioBridge({ relayUrl: relay.url, agent: bob, cwd: dir }),
  ])
}, 120_000)

afterAll(async () => {
  for (const c of [a, b]) await c?.close().catch(() => {})
  await relay?.stop()
  rmSync(dir, { recursive: true, force: true })
  rmSync(dataDir, { recursive: true, force: true })
})

describe('relay mcp, end to end encrypted', () => {
  test('a bridge publishes that its agent reads encrypted messages, keeping the rest of the metadata; RELAY_PUBLISH_ENCRYPTION=false does not', async () => {
    const carol = newAgent(dir, 'carol')
    const carolClient = new RelayClient({ baseUrl: relay.url, keys: carol.keys })
    await carolClient.updateProfile({ metadata: { team: 'blue' } })
    const c = await stdioBridge({ relayUrl: relay.url, agent: carol, cwd: dir })
    try {
      await ok(c, 'relay_whoami', {})
      const profile = await carolClient.getAgent()
      expect(profile.metadata).toMatchObject({ team: 'blue', encryption: { versions: [3, 2], require: false } })
    } finally {
      await c.close()
    }
    const aliceProfile = await new RelayClient({ baseUrl: relay.url, keys: alice.keys }).getAgent()
    expect((aliceProfile.metadata as Record<string, unknown> | null)?.encryption).toBeUndefined()
  })

  test('send to a declaring agent: body and file encrypted, the file without its name; received decrypted; download decrypted', async () => {
    // the marker in the file name too: the relay must not see it
    const notes = `notes-${MARKER}.txt`
    writeFileSync(join(dir, notes), `${MARKER} file\n`.repeat(5000))
    const sent = await ok(a, 'relay_send', { to: bob.keys.publicKey, text: `${MARKER} body`, thread_id: 'enc-mcp', attachments: [notes, { path: notes, filename: 'given-name.txt' }] })
    expect(sent.encryption).toEqual({ version: 3 })
    for (const att of sent.attachments) {
      expect(att).toMatchObject({ encrypted: true, uploaded_from: join(dir, notes), size: statSync(join(dir, notes)).size })
      expect(att.filename).toBeUndefined()
    }
    const stored = storedAttachments(sent.message_id)
    expect(stored).toHaveLength(2)
    for (const att of stored) {
      expect(att).toMatchObject({ encrypted: true, content_type: 'application/octet-stream' })
      expect(Object.keys(att)).not.toContain('filename')
    }

    const inbox = await untilPending(b, 1)
    const m = inbox.messages[0]
    expect(m.body).toEqual({ text: `${MARKER} body` })
    expect(m.encryption).toMatchObject({ version: 3, sender_verified: true })
    expect(m.attachments[0].encrypted).toBe(true)

    const got = await ok(b, 'relay_get_message', { message_id: m.message_id })
    expect(got.message.body).toEqual({ text: `${MARKER} body` })
    expect(got.message.encryption).toMatchObject({ version: 3, sender_verified: true })
    const thread = await ok(a, 'relay_thread', { thread_id: 'enc-mcp' })
    // the sender reads its own v3 message back? it was sealed for bob: the sender sees why it does not open
    expect(thread.messages[0].encryption.version).toBe(3)
    const bobThread = await ok(b, 'relay_thread', { thread_id: 'enc-mcp' })
    expect(bobThread.messages[0].body).toEqual({ text: `${MARKER} body` })

    const down = await ok(b, 'relay_download', { blob_id: m.attachments[0].blob_id, message_id: m.message_id, path: join(dir, 'got.txt') })
    expect(down.decrypted).toBe(true)
    expect(readFileSync(join(dir, 'got.txt')).equals(readFileSync(join(dir, notes)))).toBe(true)
    // found among the pending messages without message_id too
    const again = await ok(b, 'relay_download', { blob_id: m.attachments[0].blob_id, path: join(dir, 'got2.txt') })
    expect(again.decrypted).toBe(true)
    expect(readFileSync(join(dir, 'got2.txt')).equals(readFileSync(join(dir, notes)))).toBe(true)
    // no path: into the files directory, named after the blob (the sender gave no name)
    const unnamed = await ok(b, 'relay_download', { blob_id: m.attachments[1].blob_id, message_id: m.message_id })
    expect(basename(unnamed.path)).toBe(m.attachments[1].blob_id)
    expect(readFileSync(unnamed.path).equals(readFileSync(join(dir, notes)))).toBe(true)

    expectNoMarkerUnder(dataDir, MARKER)
  }, 60_000)

  test('reply to an agent that declares nothing: plaintext, unless encrypt: true (v2); encrypt: false forces plaintext', async () => {
    const [m] = (await ok(b, 'relay_inbox', { limit: 10 })).messages
    const plain = await ok(b, 'relay_reply', { message_id: m.message_id, text: 'plain answer' })
    expect(plain.encryption).toBeNull()
    const forced = await ok(b, 'relay_reply', { message_id: m.message_id, text: 'sealed answer', encrypt: true })
    expect(forced.encryption).toEqual({ version: 2 })
    const toBobPlain = await ok(a, 'relay_send', { to: bob.keys.publicKey, text: 'in the clear', encrypt: false })
    expect(toBobPlain.encryption).toBeNull()

    const got = await untilPending(a, 2)
    const byText = Object.fromEntries(got.messages.map((x: any) => [x.body.text, x]))
    expect(byText['plain answer'].encryption).toBeUndefined()
    expect(byText['sealed answer'].encryption).toMatchObject({ version: 2, sender_verified: true })
  }, 60_000)

  test('relay_wait returns an encrypted message decrypted with its facts; relay_reply to a declaring agent encrypts', async () => {
    // alice waits before bob sends: the message arrives during the wait
    const waiting = ok(a, 'relay_wait', { thread_id: 'enc-wait', timeout_s: 30 })
    await Bun.sleep(300)
    const asked = await ok(b, 'relay_send', { to: alice.keys.publicKey, text: `${MARKER} question`, thread_id: 'enc-wait', encrypt: true })
    expect(asked.encryption).toEqual({ version: 2 })
    const waited = await waiting
    expect(waited).toMatchObject({ timed_out: false, message: { message_id: asked.message_id, body: { text: `${MARKER} question` }, encryption: { version: 2, sender_verified: true } } })
    expect(waited.message.encryption.error).toBeUndefined()

    // alice's reply goes to bob, who declares v3: encrypted without being asked
    const replied = await ok(a, 'relay_reply', { message_id: asked.message_id, text: `${MARKER} answer` })
    expect(replied).toMatchObject({ recipient_key: bob.keys.publicKey, thread_id: 'enc-wait', in_reply_to: asked.message_id, encryption: { version: 3 } })
    const answer = await ok(b, 'relay_wait', { in_reply_to: asked.message_id, timeout_s: 30 })
    expect(answer.message).toMatchObject({ message_id: replied.message_id, body: { text: `${MARKER} answer` }, encryption: { version: 3, sender_verified: true } })
    // what the relay holds is the envelope
    const raw = await new RelayClient({ baseUrl: relay.url, keys: bob.keys, encryption: { decrypt: false } }).getMessage(replied.message_id)
    expect(raw.content_type).toBe('application/x-m2m-encrypted')
    expect(JSON.stringify(raw)).not.toContain(MARKER)
    await ok(a, 'relay_ack', { message_ids: [asked.message_id] })
    await ok(b, 'relay_ack', { message_ids: [replied.message_id] })
    expectNoMarkerUnder(dataDir, MARKER)
  }, 60_000)

  test('an inbox that starts requiring encryption after the sender looked: the refused plaintext send goes again encrypted, its file too', async () => {
    const dave = newAgent(dir, 'dave')
    const daveClient = new RelayClient({ baseUrl: relay.url, keys: dave.keys })
    await daveClient.updateProfile({ display_name: 'dave' })
    // alice's bridge reads dave's profile (nothing declared) and keeps that answer for a while
    const first = await ok(a, 'relay_send', { to: dave.keys.publicKey, text: 'before' })
    expect(first.encryption).toBeNull()
    await daveClient.declareEncryption({ require: true })
    writeFileSync(join(dir, 'for-dave.txt'), 'a file for dave\n')
    const sent = await ok(a, 'relay_send', { to: dave.keys.publicKey, text: `${MARKER} to dave`, attachments: ['for-dave.txt'] })
    expect(sent.encryption).toEqual({ version: 3 })
    expect(sent.attachments[0]).toMatchObject({ encrypted: true })
    const got = await daveClient.getMessage(sent.message_id)
    expect(got).toMatchObject({ body: { text: `${MARKER} to dave` }, encryption: { version: 3, sender_verified: true } })
    expect(got.attachments![0]).toMatchObject({ encrypted: true })
    expect(got.attachments![0]!.filename).toBeUndefined()
    expect(await new Response(await daveClient.downloadDecrypted(got, got.attachments![0]!)).text()).toBe('a file for dave\n')
    // asked for plaintext: refused, and said so
    const refused = await call(a, 'relay_send', { to: dave.keys.publicKey, text: 'open', encrypt: false })
    expect(refused.isError).toBe(true)
    expect(textOf(refused)).toContain('encryption_required')
  }, 60_000)

  test('a message that does not open: the reason, the envelope, never garbage', async () => {
    // sealed for another key, addressed to bob
    const e2e = bindEncryption(nativePrimitives)
    const other = generateKeyPair()
    const sealed = e2e.sealMessage({ version: 3, sender: alice.keys, recipientKey: other.publicKey, body: { text: MARKER } })
    const sent = await new RelayClient({ baseUrl: relay.url, keys: alice.keys }).send({ recipient_key: bob.keys.publicKey, ...sealed })
    const deadline = Date.now() + 15_000
    let msg: any
    while (!msg && Date.now() < deadline) {
      msg = (await ok(b, 'relay_inbox', { limit: 100 })).messages.find((x: any) => x.message_id === sent.message_id)
      if (!msg) await Bun.sleep(50)
    }
    expect(msg.encryption.error.reason).toEqual(expect.any(String))
    expect(JSON.stringify(msg)).not.toContain(MARKER)
    const got = await ok(b, 'relay_get_message', { message_id: sent.message_id })
    expect(got.message.encryption.error.reason).toBe(msg.encryption.error.reason)
  }, 60_000)

  test('relay_whoami reports the encryption facts', async () => {
    const who = await ok(b, 'relay_whoami')
    expect(who.encryption).toMatchObject({ end_to_end: true, declared: true, required: false })
    expect([...who.encryption.versions].sort()).toEqual([2, 3])
    const whoA = await ok(a, 'relay_whoami')
    expect(whoA.encryption).toMatchObject({ end_to_end: true, declared: false })
  }, 30_000)
})
