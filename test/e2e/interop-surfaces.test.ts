/**
 * MRP v2 (docs/protocol.md §14.3, §14.5) between an independent implementation — @hpke/core and
 * WebCrypto only (test/support/independent-*.ts), sending over plain signed fetch — and every client
 * surface of this project, through the compiled relay: the TypeScript client, the command line
 * (`poll --json`, `get --json`, `download --message`) and `relay mcp` (relay_get_message,
 * relay_download). The independent side writes messages and encrypted attachments the surfaces must
 * open as verified from their sender; and it opens, unwraps and decrypts what each surface sends to it
 * because it declares that it reads v2 (§14.6). Attachments of 0 bytes, one full segment and several
 * segments cover the segment boundaries.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { ENCRYPTED_CONTENT_TYPE, RelayClient } from '../../src/client/index.ts'
import { buildBinary, startBinary, type RunningBinary, stopBinary } from '../support/binary.ts'
import { runCli } from '../support/cli.ts'
import { tempDir } from '../support/harness.ts'
import { IndependentAgent } from '../support/independent-agent.ts'
import { readEncryptedBlob, writeEncryptedBlob } from '../support/independent-blob.ts'
import { openAuth, openV2Body, sealV2Body, unwrapDekV2, wrapDekV2 } from '../support/independent-hpke.ts'
import { newAgent, ok, stdioBridge, type Agent, type Bridge } from '../mcp/helpers.ts'

const MARKER = 'INTEROP-MARKER-5c2e'
const SIZES = [0, 65536, 150_001]
const same = (a: Uint8Array, b: Uint8Array) => Buffer.from(a).equals(Buffer.from(b))

let dir: string
let relay: RunningBinary
let them: IndependentAgent
let viaClient: Agent
let viaCli: Agent
let viaMcp: Agent
let client: RelayClient
let bridge: Bridge
const cli = (args: string[]) => runCli([...args, '--relay', relay.url, '--key', viaCli.keyFile], { cwd: dir })

beforeAll(async () => {
  await buildBinary()
  dir = tempDir('relay-e2e-interop-')
  relay = await startBinary({ cwd: dir, dataDir: join(dir, 'data') })
  them = new IndependentAgent(relay.url, generateKeyPair())
  // §14.6: it reads v2 only, so every surface that sends to it by the rules must choose v2
  await them.declare([2])
  viaClient = newAgent(dir, 'client')
  viaCli = newAgent(dir, 'cli')
  viaMcp = newAgent(dir, 'mcp')
  client = new RelayClient({ baseUrl: relay.url, keys: viaClient.keys })
  bridge = await stdioBridge({ relayUrl: relay.url, agent: viaMcp, cwd: dir })
}, 120_000)

afterAll(async () => {
  await bridge?.close().catch(() => {})
  await stopBinary(relay, dir)
})

/** The independent side sends `toKey` a v2 message with one encrypted attachment per size; what it sent. */
async function theySend(toKey: string, sealer = them.keys) {
  const body = { text: `${MARKER} for ${toKey.slice(0, 8)}`, n: [1, 2.5, 'ü'] }
  const files = SIZES.map((size) => new Uint8Array(randomBytes(size)))
  const attachments = []
  for (const file of files) {
    const dek = new Uint8Array(randomBytes(32))
    const blob_id = await them.upload(await writeEncryptedBlob(dek, file))
    attachments.push({ blob_id, encrypted: true, ...(await wrapDekV2(sealer, toKey, dek)) })
  }
  const id = await them.send({ recipient_key: toKey, content_type: ENCRYPTED_CONTENT_TYPE, body: await sealV2Body(sealer, toKey, 'application/json', body), attachments })
  return { id, body, files }
}

/** What a surface must show for a message from the independent side: the plaintext, verified v2, encrypted attachments. */
function expectOpened(m: any, sent: { id: string; body: unknown }) {
  expect(m.message_id).toBe(sent.id)
  expect(m.sender_key).toBe(them.publicKey)
  expect(m.content_type).toBe('application/json')
  expect(m.body).toEqual(sent.body)
  expect(m.encryption).toMatchObject({ version: 2, sender_verified: true })
  expect(m.encryption.error).toBeUndefined()
  expect(m.attachments.map((a: any) => a.encrypted)).toEqual(SIZES.map(() => true))
}

describe('the independent implementation sends; every surface opens', () => {
  test('TypeScript client: poll and getMessage decrypt the body, downloadDecrypted the attachments', async () => {
    const sent = await theySend(viaClient.keys.publicKey)
    const polled = (await client.poll()).messages.find((m) => m.message_id === sent.id)
    expectOpened(polled, sent)
    const m = await client.getMessage(sent.id)
    expectOpened(m, sent)
    for (const [i, file] of sent.files.entries()) {
      const plain = new Uint8Array(await new Response(await client.downloadDecrypted(m, m.attachments[i]!)).arrayBuffer())
      expect(same(plain, file)).toBe(true)
    }
  })

  test('command line: poll --json and get --json decrypt the body, download --message the attachments', async () => {
    const sent = await theySend(viaCli.keys.publicKey)
    const polled = await cli(['poll', '--json'])
    expect(polled.code).toBe(0)
    expectOpened(JSON.parse(polled.stdout).messages.find((m: any) => m.message_id === sent.id), sent)
    const got = await cli(['get', sent.id, '--json'])
    expect(got.code).toBe(0)
    const m = JSON.parse(got.stdout)
    expectOpened(m, sent)
    for (const [i, file] of sent.files.entries()) {
      const down = await cli(['download', m.attachments[i].blob_id, '--message', sent.id, '-o', `cli-in-${i}.bin`])
      expect(down.stderr).toBe('')
      expect(down.code).toBe(0)
      expect(same(readFileSync(join(dir, `cli-in-${i}.bin`)), file)).toBe(true)
    }
  })

  test('relay mcp: relay_get_message decrypts the body, relay_download the attachments', async () => {
    const sent = await theySend(viaMcp.keys.publicKey)
    const { message: m } = await ok(bridge, 'relay_get_message', { message_id: sent.id })
    expectOpened(m, sent)
    for (const [i, file] of sent.files.entries()) {
      const down = await ok(bridge, 'relay_download', { blob_id: m.attachments[i].blob_id, message_id: sent.id, path: join(dir, `mcp-in-${i}.bin`) })
      expect(down.decrypted).toBe(true)
      expect(same(readFileSync(join(dir, `mcp-in-${i}.bin`)), file)).toBe(true)
    }
  }, 60_000)

  test('sealed under another key than its sender_key: every surface refuses it as not from that sender', async () => {
    const impostor = generateKeyPair()
    const toClient = await theySend(viaClient.keys.publicKey, impostor)
    expect((await client.getMessage(toClient.id)).encryption).toMatchObject({ version: 2, sender_verified: false, error: { reason: 'authentication_failed' } })
    const toCli = await theySend(viaCli.keys.publicKey, impostor)
    const got = await cli(['get', toCli.id, '--json'])
    expect(got.code).toBe(1)
    expect(JSON.parse(got.stdout).encryption.error.reason).toBe('authentication_failed')
    expect(got.stdout).not.toContain(MARKER)
    const toMcp = await theySend(viaMcp.keys.publicKey, impostor)
    const { message } = await ok(bridge, 'relay_get_message', { message_id: toMcp.id })
    expect(message.encryption.error.reason).toBe('authentication_failed')
  }, 60_000)
})

/** The independent side reads message `id`: sealed by `senderKey` (and no other key), v2, its body and files. */
async function theyRead(id: string, senderKey: string, body: unknown, files: Uint8Array[]) {
  const m = await them.getMessage(id)
  expect(m.sender_key).toBe(senderKey)
  expect(m.content_type).toBe(ENCRYPTED_CONTENT_TYPE)
  expect(m.body).toMatchObject({ v: 2, ct_content_type: 'application/json' })
  expect(JSON.stringify(m)).not.toContain(MARKER)
  expect(await openV2Body(them.keys, m)).toEqual(body)
  // Auth mode names the sender: under any other sender key the same ciphertext does not open
  await expect(openAuth(them.keys, generateKeyPair().publicKey, m.body)).rejects.toThrow()
  expect(m.attachments).toHaveLength(files.length)
  for (const [i, a] of m.attachments.entries()) {
    expect(a.encrypted).toBe(true)
    const dek = await unwrapDekV2(them.keys, senderKey, a)
    expect(same(await readEncryptedBlob(dek, await them.download(a.blob_id)), files[i]!)).toBe(true)
  }
}

/** One file per size in `dir`, named `prefix-i.bin`; their names and bytes. */
function writeFiles(prefix: string) {
  const files = SIZES.map((size) => new Uint8Array(randomBytes(size)))
  const names = files.map((file, i) => {
    writeFileSync(join(dir, `${prefix}-${i}.bin`), file)
    return `${prefix}-${i}.bin`
  })
  return { names, files }
}

describe('every surface sends to an agent that declares v2; the independent implementation opens', () => {
  test('TypeScript client: uploadEncryptedBlob and send', async () => {
    const body = { text: `${MARKER} from the client` }
    const files = SIZES.map((size) => new Uint8Array(randomBytes(size)))
    const attachments = []
    for (const file of files) attachments.push((await client.uploadEncryptedBlob(file, { recipientKey: them.publicKey })).attachment)
    const sent = await client.send({ recipient_key: them.publicKey, body, attachments })
    await theyRead(sent.message_id, viaClient.keys.publicKey, body, files)
  })

  test('command line: send --text --attach', async () => {
    const { names, files } = writeFiles('cli-out')
    const sent = await cli(['send', '--to', them.publicKey, '--text', `${MARKER} from the command line`, ...names.flatMap((n) => ['--attach', n]), '--json'])
    expect(sent.stderr).toBe('')
    expect(sent.code).toBe(0)
    await theyRead(JSON.parse(sent.stdout).message_id, viaCli.keys.publicKey, { text: `${MARKER} from the command line` }, files)
  })

  test('relay mcp: relay_send with attachments', async () => {
    const { names, files } = writeFiles('mcp-out')
    const sent = await ok(bridge, 'relay_send', { to: them.publicKey, text: `${MARKER} from mcp`, attachments: names })
    expect(sent.encryption).toEqual({ version: 2 })
    await theyRead(sent.message_id, viaMcp.keys.publicKey, { text: `${MARKER} from mcp` }, files)
  }, 60_000)
})
