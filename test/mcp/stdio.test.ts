/**
 * `relay mcp` as an MCP host sees it, over stdio, the compiled binary against the compiled relay: the
 * tool list and its schemas, two agents talking through their bridges, a non-destructive inbox with an
 * explicit ack that survives a bridge restart, waiting, files by path, refusals as isError.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js'
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { startBinary, tempDataDir, type RunningRelay } from '../e2e/binary.ts'
import { tempDir } from '../support/harness.ts'

/** These bridges test plaintext behaviour (file names, sizes); encryption has test/mcp/encryption.test.ts. */
const PLAIN = { RELAY_PUBLISH_ENCRYPTION: 'false' }
import { TOOLS, call, newAgent, ok, stdioBridge, textOf, untilPending, type Agent, type Bridge } from './helpers.ts'

let relay: RunningRelay
let dir: string
let alice: Agent
let bob: Agent
let a: Bridge
let b: Bridge
const transcript: string[] = []

beforeAll(async () => {
  relay = await startBinary(tempDataDir())
  dir = tempDir('relay-mcp-')
  alice = newAgent(dir, 'alice')
  bob = newAgent(dir, 'bob')
  ;[a, b] = await Promise.all([stdioBridge({ relayUrl: relay.url, agent: alice, cwd: dir, env: PLAIN }), stdioBridge({ relayUrl: relay.url, agent: bob, cwd: dir, env: PLAIN })])
}, 120_000)

afterAll(async () => {
  await a?.close()
  await b?.close()
  await relay?.stop()
  if (transcript.length) console.log(`\n--- two agents through their bridges ---\n${transcript.join('\n')}\n`)
  rmSync(dir, { recursive: true, force: true })
})

/** Calls a tool and keeps a line of transcript. */
async function say<T = any>(who: 'alice' | 'bob', name: string, args: Record<string, unknown> = {}): Promise<T> {
  const result = await ok<T>(who === 'alice' ? a : b, name, args)
  transcript.push(`${who.padEnd(5)} → ${name} ${JSON.stringify(args)}\n        ← ${JSON.stringify(result).slice(0, 400)}`)
  return result
}

describe('the tool list', () => {
  test('has every tool by its exact name, each with input and output schemas and annotations', async () => {
    expect(a.protocolVersion()).toBe(LATEST_PROTOCOL_VERSION)
    expect(LATEST_PROTOCOL_VERSION).toBe('2025-11-25')
    expect(a.client.getServerVersion()?.name).toBe('agent-relay')
    expect(a.client.getInstructions()).toContain('relay_ack')
    expect(a.client.getServerCapabilities()?.resources?.subscribe).toBe(true)
    const { tools } = await a.client.listTools()
    console.log(tools.map((t) => `${t.name.padEnd(22)} ${t.annotations?.readOnlyHint ? 'read-only ' : t.annotations?.destructiveHint ? 'destructive' : 'writes    '} ${t.title}`).join('\n'))
    expect(tools.map((t) => t.name).sort()).toEqual([...TOOLS].sort())
    for (const t of tools) {
      expect([t.name, t.inputSchema.type, t.outputSchema?.type]).toEqual([t.name, 'object', 'object'])
      expect([t.name, typeof t.description, (t.description ?? '').length > 20]).toEqual([t.name, 'string', true])
      expect([t.name, t.annotations?.readOnlyHint !== undefined]).toEqual([t.name, true])
    }
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]))
    for (const name of ['relay_whoami', 'relay_discover', 'relay_capabilities', 'relay_get_agent', 'relay_inbox', 'relay_wait', 'relay_get_message', 'relay_thread', 'relay_message_status', 'relay_acl_list']) {
      expect([name, byName[name].annotations?.readOnlyHint]).toEqual([name, true])
    }
    // destructive: more than an additive update (an ack ends a message's wait for good; a profile field is replaced)
    for (const name of ['relay_acl_set', 'relay_acl_delete', 'relay_ack', 'relay_update_profile']) {
      expect([name, byName[name].annotations?.readOnlyHint, byName[name].annotations?.destructiveHint]).toEqual([name, false, true])
    }
    // additive only: a new message, a new blob, a new file (a download replaces one only with --allow-overwrite)
    for (const name of ['relay_send', 'relay_reply', 'relay_upload', 'relay_download']) {
      expect([name, byName[name].annotations?.readOnlyHint, byName[name].annotations?.destructiveHint]).toEqual([name, false, false])
    }
    expect(byName.relay_send.inputSchema.required).toEqual(['to'])
    expect(Object.keys(byName.relay_send.inputSchema.properties ?? {})).toEqual(
      expect.arrayContaining(['to', 'body', 'text', 'content_type', 'thread_id', 'in_reply_to', 'expires_in', 'metadata', 'attachments']),
    )
    expect(Object.keys(byName.relay_wait.inputSchema.properties ?? {})).toEqual(expect.arrayContaining(['thread_id', 'in_reply_to', 'from', 'timeout_s']))
    expect((byName.relay_wait.inputSchema.properties as any).timeout_s.maximum).toBe(300)
    expect(byName.relay_inbox.outputSchema?.required).toEqual(expect.arrayContaining(['messages', 'pending_count', 'has_more', 'next_cursor']))
  })
})

describe('two agents through their bridges', () => {
  test('send, wait, read the inbox twice, reply, wait for the reply, ack', async () => {
    const me = await say('alice', 'relay_whoami')
    expect(me.public_key).toBe(alice.keys.publicKey)
    expect(me.connection.state).toBe('connected')
    await say('bob', 'relay_update_profile', { display_name: 'Bob', visibility: 'public', capabilities: [{ name: 'echo', tags: ['mcp-test'] }] })
    const found = await say('alice', 'relay_discover', { tags: ['mcp-test'] })
    expect(found.agents.map((x: any) => x.public_key)).toEqual([bob.keys.publicKey])

    const sent = await say('alice', 'relay_send', { to: bob.keys.publicKey, text: 'ping from alice', thread_id: 'mcp-1' })
    const got = await say('bob', 'relay_wait', { from: alice.keys.publicKey, timeout_s: 20 })
    expect(got.timed_out).toBe(false)
    expect(got.message).toMatchObject({ message_id: sent.message_id, body: { text: 'ping from alice' }, thread_id: 'mcp-1', status: 'sent' })

    const first = await say('bob', 'relay_inbox')
    const second = await ok(b, 'relay_inbox')
    expect(first.messages.map((m: any) => m.message_id)).toEqual([sent.message_id])
    expect(second.messages).toEqual(first.messages)
    expect((await ok(a, 'relay_message_status', { message_id: sent.message_id })).status).toBe('sent')

    const reply = await say('bob', 'relay_reply', { message_id: sent.message_id, text: 'pong from bob' })
    expect(reply).toMatchObject({ recipient_key: alice.keys.publicKey, thread_id: 'mcp-1', in_reply_to: sent.message_id })
    const answer = await say('alice', 'relay_wait', { in_reply_to: sent.message_id, timeout_s: 20 })
    expect(answer.message).toMatchObject({ message_id: reply.message_id, sender_key: bob.keys.publicKey, body: { text: 'pong from bob' } })

    const acked = await say('bob', 'relay_ack', { message_ids: [sent.message_id] })
    expect(acked).toMatchObject({ acked: [sent.message_id], not_found: [], failed: [], via: 'websocket', pending_count: 0 })
    expect((await ok(b, 'relay_inbox')).messages).toEqual([])
    expect((await say('alice', 'relay_message_status', { message_id: sent.message_id })).status).toBe('delivered')
    const thread = await say('alice', 'relay_thread', { thread_id: 'mcp-1' })
    expect(thread.messages.map((m: any) => m.message_id)).toEqual([sent.message_id, reply.message_id])
    await ok(a, 'relay_ack', { message_ids: [reply.message_id] })
  })

  test('wait without a match times out with message null; a pending match returns at once unless new_only', async () => {
    const started = Date.now()
    const none = await ok(b, 'relay_wait', { thread_id: 'nothing-here', timeout_s: 1 })
    expect(none).toMatchObject({ message: null, timed_out: true })
    expect(Date.now() - started).toBeGreaterThanOrEqual(900)

    const sent = await ok(a, 'relay_send', { to: bob.keys.publicKey, body: { n: 1 }, thread_id: 'mcp-wait' })
    const now = await ok(b, 'relay_wait', { thread_id: 'mcp-wait', timeout_s: 20 })
    expect(now.message.message_id).toBe(sent.message_id)
    expect((await ok(b, 'relay_wait', { thread_id: 'mcp-wait', timeout_s: 5 })).message.message_id).toBe(sent.message_id) // not acked by waiting
    const fresh = ok(b, 'relay_wait', { thread_id: 'mcp-wait', timeout_s: 20, new_only: true })
    await Bun.sleep(1000) // time for the wait to reach the bridge: a message already pending would not count
    const later = await ok(a, 'relay_send', { to: bob.keys.publicKey, body: { n: 2 }, thread_id: 'mcp-wait' })
    expect((await fresh).message.message_id).toBe(later.message_id)
    await ok(b, 'relay_ack', { message_ids: [sent.message_id, later.message_id] })
  })

  test('inbox and ack across a bridge restart: nothing acked is lost, nothing acked comes back', async () => {
    const one = await ok(a, 'relay_send', { to: bob.keys.publicKey, text: 'survives a restart' })
    const two = await ok(a, 'relay_send', { to: bob.keys.publicKey, text: 'acked before the restart' })
    await untilPending(b, 2)
    expect((await ok(b, 'relay_inbox')).messages.map((m: any) => m.message_id)).toEqual([one.message_id, two.message_id])
    await ok(b, 'relay_ack', { message_ids: [two.message_id] })

    await b.close()
    b = await stdioBridge({ relayUrl: relay.url, agent: bob, cwd: dir, env: PLAIN })
    const after = await ok(b, 'relay_inbox')
    expect(after.messages.map((m: any) => m.message_id)).toEqual([one.message_id])
    expect(after.connection).toMatchObject({ state: 'connected', synced: true })
    expect((await ok(a, 'relay_message_status', { message_id: one.message_id })).status).toBe('sent')
    expect((await ok(a, 'relay_message_status', { message_id: two.message_id })).status).toBe('delivered')

    await ok(b, 'relay_ack', { message_ids: [one.message_id] })
    await b.close()
    b = await stdioBridge({ relayUrl: relay.url, agent: bob, cwd: dir, env: PLAIN })
    expect((await ok(b, 'relay_inbox')).pending_count).toBe(0)
  })

  test('files by path: send a local file, download it to a path, upload one; never base64 in results', async () => {
    const content = 'report line\n'.repeat(5000)
    writeFileSync(join(dir, 'report.txt'), content)
    const sent = await ok(a, 'relay_send', { to: bob.keys.publicKey, text: 'report attached', attachments: ['report.txt'] })
    expect(sent.attachments).toEqual([expect.objectContaining({ filename: 'report.txt', uploaded_from: join(dir, 'report.txt'), size: content.length })])
    const got = await ok(b, 'relay_wait', { from: alice.keys.publicKey, timeout_s: 20 })
    const att = got.message.attachments[0]
    expect(att).toMatchObject({ blob_id: sent.attachments[0].blob_id, filename: 'report.txt', size: content.length, content_type: expect.stringContaining('text/plain') })

    const file = await ok(b, 'relay_download', { blob_id: att.blob_id, path: 'bob-copy.txt' })
    expect(file).toMatchObject({ path: join(dir, 'bob-copy.txt'), size: content.length, sha256: att.hash })
    expect(readFileSync(join(dir, 'bob-copy.txt'), 'utf8')).toBe(content)
    const again = await call(b, 'relay_download', { blob_id: att.blob_id, path: 'bob-copy.txt' })
    expect(again.isError).toBe(true)
    expect(textOf(again)).toContain('already exists')

    const up = await ok(b, 'relay_upload', { path: 'bob-copy.txt' })
    expect(up.blob_id).toMatch(/^blob_/)
    expect(up).toMatchObject({ size: content.length, sha256: att.hash, path: join(dir, 'bob-copy.txt') })
    const byId = await ok(b, 'relay_send', { to: alice.keys.publicKey, text: 'same file back', attachments: [{ blob_id: up.blob_id, filename: 'back.txt' }] })
    expect(byId.attachments).toEqual([{ blob_id: up.blob_id, filename: 'back.txt' }])
    const missing = await call(a, 'relay_upload', { path: 'no-such-file.bin' })
    expect(missing.isError).toBe(true)
    expect(textOf(missing)).toContain('no such file')
    for (const r of [sent, got, file, up]) expect(JSON.stringify(r)).not.toContain(Buffer.from(content.slice(0, 30)).toString('base64'))
    await ok(b, 'relay_ack', { message_ids: [got.message.message_id] })
  })
})

describe('refusals', () => {
  test("a refused call is a result with isError and the relay's code and message", async () => {
    await ok(b, 'relay_update_profile', { inbox_policy: 'closed' })
    const refused = await call(a, 'relay_send', { to: bob.keys.publicKey, text: 'let me in' })
    expect(refused.isError).toBe(true)
    expect(refused.structuredContent).toBeUndefined()
    expect(textOf(refused)).toMatch(/^The relay refused the request: acl_denied: .+ \(HTTP 403, request req_\S+\)$/)
    await ok(b, 'relay_update_profile', { inbox_policy: 'blocklist' })

    const unknown = await call(a, 'relay_get_agent', { public_key: 'A'.repeat(43) })
    expect(unknown.isError).toBe(true)
    expect(textOf(unknown)).toContain('agent_not_found')
    const ackUnknown = await ok(a, 'relay_ack', { message_ids: ['msg_1_000000000000'] })
    expect(ackUnknown).toMatchObject({ acked: [], not_found: ['msg_1_000000000000'] })
  })

  test('arguments the schema refuses are refused before the relay is asked', async () => {
    const r = await call(a, 'relay_send', { to: 'not-a-key', text: 'x' })
    expect(r.isError).toBe(true)
    expect(textOf(r)).toContain('to')
  })
})

describe('the process', () => {
  test('relay mcp --help (and relay help mcp) names the flags and every tool', async () => {
    const { relayBinary } = await import('../e2e/binary.ts')
    for (const args of [['mcp', '--help'], ['help', 'mcp']]) {
      const proc = Bun.spawn([await relayBinary(), ...args], { cwd: dir, stdout: 'pipe', stderr: 'pipe' })
      const [code, out] = await Promise.all([proc.exited, new Response(proc.stdout).text()])
      expect(code).toBe(0)
      for (const word of ['--relay URL', '--key FILE', '--http HOST:PORT', '--allowed-host', '--allowed-origin', 'RELAY_URL', 'RELAY_KEY_FILE', ...TOOLS]) expect(out).toContain(word)
    }
  })

  test('exits 0 when the host closes its standard input, with its log on standard error only', async () => {
    const { relayBinary } = await import('../e2e/binary.ts')
    const proc = Bun.spawn([await relayBinary(), 'mcp', '--relay', relay.url, '--key', alice.keyFile], { cwd: dir, stdin: 'pipe', stdout: 'pipe', stderr: 'pipe' })
    await Bun.sleep(300)
    proc.stdin.end()
    const exited = await Promise.race([proc.exited, Bun.sleep(10_000).then(() => 'still running')])
    if (exited === 'still running') proc.kill(9)
    expect(exited).toBe(0)
    expect(await new Response(proc.stdout).text()).toBe('')
    expect(await new Response(proc.stderr).text()).toContain(`relay mcp: agent ${alice.keys.publicKey} on ${relay.url}`)
  }, 20_000)
})

describe('key files of MRP tools', () => {
  test('relay mcp signs with a raw 32-byte seed file (mrp-sdk Keypair.save) and warns that others can read it', async () => {
    const { generateKeyPair } = await import('../../src/auth/sign.ts')
    const keys = generateKeyPair()
    const keyFile = join(dir, 'mrp-seed.key')
    writeFileSync(keyFile, keys.seed, { mode: 0o644 })
    const seedAgent: Agent = { keys, keyFile }
    const bridge = await stdioBridge({ relayUrl: relay.url, agent: seedAgent, cwd: dir, env: PLAIN })
    try {
      const me = await ok<any>(bridge, 'relay_whoami')
      expect(me.public_key).toBe(keys.publicKey)
      const sent = await ok<any>(bridge, 'relay_send', { to: bob.keys.publicKey, text: 'from a seed file' })
      const got = await ok<any>(b, 'relay_wait', { from: keys.publicKey, timeout_s: 20 })
      expect(got.message).toMatchObject({ message_id: sent.message_id, sender_key: keys.publicKey, body: { text: 'from a seed file' } })
      await ok(b, 'relay_ack', { message_ids: [sent.message_id] })
      expect(bridge.stderr()).toContain('can be read by others')
    } finally {
      await bridge.close()
    }
  }, 60_000)
})

describe('--relay with a path', () => {
  test('a URL ending in /v1 is warned about at start, and each "No such route" answer carries the hint', async () => {
    const bridge = await stdioBridge({ relayUrl: `${relay.url}/v1`, agent: alice, cwd: dir, env: PLAIN })
    try {
      const refused = await call(bridge, 'relay_discover', { tags: ['anything'] })
      expect(refused.isError).toBe(true)
      expect(textOf(refused)).toContain(`\nhint: --relay is the relay's address without /v1 (every command adds it): try --relay ${relay.url}`)
      expect(bridge.stderr()).toContain(`relay mcp: warning: --relay is the relay's address without /v1`)
    } finally {
      await bridge.close()
    }
  }, 60_000)
})
