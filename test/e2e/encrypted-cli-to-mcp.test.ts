/**
 * End-to-end encrypted attachments of 0 bytes, 1 byte and 100 MiB from the command line to an agent
 * that runs `relay mcp`, all through one compiled binary: `relay send --attach` and `relay upload
 * --encrypt-for` + `send --blob` on one side; the MCP SDK's client driving the bridge on the other —
 * relay_wait, relay_inbox and relay_get_message show each message decrypted, relay_download writes
 * each file decrypted. The bytes that arrive are the bytes sent (SHA-256, streamed), the files travel
 * without their names, and the relay's database file, its WAL and its blob directory hold no
 * plaintext marker (in the bodies, the files and the file names). The relay allows 101 MiB blobs: an
 * encrypted 100 MiB file is 25,617 bytes over the default limit, which counts stored bytes.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { rmSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { BINARY, buildBinary, startBinary, type RunningBinary, stopBinary } from '../support/binary.ts'
import { sha256File, writeMarkedFile } from '../support/big-file.ts'
import { runCli } from '../support/cli.ts'
import { expectNoMarkerUnder, fileContains, filesUnder } from '../support/disk.ts'
import { tempDir } from '../support/harness.ts'
import { newAgent, ok, stdioBridge, type Agent, type Bridge } from '../mcp/helpers.ts'

const MARKER = 'CLI-TO-MCP-MARKER-5a07'
const BIG = 100 * 1024 * 1024
let dir: string
let relay: RunningBinary
let bob: Agent
let bridge: Bridge
const cli = (args: string[]) => runCli([...args, '--relay', relay.url, '--key', 'me.key'], { cwd: dir })

/** Stored bytes of an encrypted file of `size` bytes (docs/protocol.md §14.5). */
const storedSize = (size: number) => 17 + size + 16 * Math.max(1, Math.ceil(size / 65_536))

beforeAll(async () => {
  await buildBinary()
  dir = tempDir('relay-e2e-cli-mcp-')
  relay = await startBinary({ cwd: dir, dataDir: join(dir, 'data'), env: { RELAY_BLOB_MAX_SIZE: '101MiB' } })
  expect((await runCli(['keygen', '--out', 'me.key'], { cwd: dir })).code).toBe(0)
  bob = newAgent(dir, 'bob')
  // the bridge publishes that bob reads encrypted messages before its first request
  bridge = await stdioBridge({ relayUrl: relay.url, agent: bob, cwd: dir, binary: BINARY })
  expect((await ok(bridge, 'relay_whoami')).encryption).toMatchObject({ declared: true })
}, 120_000)

afterAll(async () => {
  await bridge?.close().catch(() => {})
  await stopBinary(relay, dir)
})

/** Sends `file` from the CLI in thread `thread`, by --attach or by upload --encrypt-for then --blob; returns the message id. */
async function sendFromCli(file: string, thread: string, how: 'attach' | 'upload'): Promise<string> {
  let attach = ['--attach', file]
  if (how === 'upload') {
    const up = await cli(['upload', file, '--encrypt-for', bob.keys.publicKey])
    expect([up.code, up.stderr]).toEqual([0, ''])
    attach = ['--blob', /send with\s+--blob (\S+)/.exec(up.stdout)![1]!]
  }
  const sent = await cli(['send', '--to', bob.keys.publicKey, '--text', `${MARKER} ${thread}`, '--thread', thread, ...attach, '--json'])
  expect([sent.code, sent.stderr]).toEqual([0, ''])
  return JSON.parse(sent.stdout).message_id
}

/** The MCP side: waits for the message, checks it decrypted, downloads the file; returns the download's result. */
async function receiveOnMcp(messageId: string, thread: string, size: number) {
  const waited = await ok(bridge, 'relay_wait', { thread_id: thread, timeout_s: 60 })
  const m = waited.message
  expect(m).toMatchObject({ message_id: messageId, body: { text: `${MARKER} ${thread}` }, encryption: { version: 3, sender_verified: true } })
  expect(m.attachments).toHaveLength(1)
  expect(m.attachments[0]).toMatchObject({ encrypted: true, size: storedSize(size), content_type: 'application/octet-stream' })
  expect(m.attachments[0].filename).toBeUndefined()
  expect((await ok(bridge, 'relay_get_message', { message_id: messageId })).message).toEqual(m)
  const down = await ok(bridge, 'relay_download', { blob_id: m.attachments[0].blob_id, message_id: messageId, path: `${thread}.out` })
  expect(down).toMatchObject({ decrypted: true, size })
  await ok(bridge, 'relay_ack', { message_ids: [messageId] })
  return down
}

describe('CLI → relay → relay mcp, encrypted', () => {
  test('0 bytes by send --attach, 1 byte by upload --encrypt-for: the same bytes arrive', async () => {
    for (const [size, how] of [[0, 'attach'], [1, 'upload']] as const) {
      // thread ids are visible to the relay (docs/protocol.md §14.8); file names are not sent
      const thread = `small-${size}`
      const file = join(dir, `${thread}-${MARKER}.bin`)
      const hash = writeMarkedFile(file, size, MARKER)
      const id = await sendFromCli(file, thread, how)
      const down = await receiveOnMcp(id, thread, size)
      expect(down.sha256).toBe(hash)
      expect(await sha256File(down.path)).toBe(hash)
    }
    const inbox = await ok(bridge, 'relay_inbox', {})
    expect(inbox.pending_count).toBe(0)
  }, 60_000)

  test('100 MiB by send --attach: the same bytes arrive; no plaintext in relay.db, its WAL or the blob directory', async () => {
    const thread = 'big'
    const file = join(dir, `${thread}-${MARKER}.bin`)
    const hash = writeMarkedFile(file, BIG, MARKER)
    // the search finds the marker where it is (the file sent), so finding it nowhere below means something
    expect(fileContains(file, MARKER)).toBe(true)
    const id = await sendFromCli(file, thread, 'attach')
    // one message waiting, seen in the inbox before it is waited for
    const inbox = await ok(bridge, 'relay_inbox', {})
    expect(inbox.messages.map((m: { message_id: string }) => m.message_id)).toEqual([id])
    const down = await receiveOnMcp(id, thread, BIG)
    expect(down.sha256).toBe(hash)
    expect(await sha256File(down.path)).toBe(hash)
    rmSync(down.path)
    rmSync(file)

    const data = join(dir, 'data')
    const stored = filesUnder(data)
    expect(stored.some((f) => f.endsWith('relay.db'))).toBe(true)
    expect(stored.some((f) => statSync(f).size === storedSize(BIG))).toBe(true)
    expectNoMarkerUnder(data, MARKER)
  }, 300_000)
})
