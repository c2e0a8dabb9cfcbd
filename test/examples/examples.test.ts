/**
 * examples/ run as written, against the compiled relay: the echo agent answers in the thread, the
 * webhook receiver registers itself and prints only verified deliveries, and the MCP configuration
 * starts `relay mcp` the way a host does — that agent then talks to the echo agent.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { spawn, type Subprocess } from 'bun'
import { mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { RelayClient, encodeKeyFile, generateKeyPair, type KeyPair, type MessageJson } from '../../src/client/index.ts'
import { freePort } from '../support/binary.ts'
import { tempDir } from '../support/harness.ts'
import { relayBinary, startBinary, tempDataDir, type RunningRelay } from '../e2e/binary.ts'

const ROOT = join(import.meta.dir, '..', '..')
const EXAMPLES = join(ROOT, 'examples')

let relay: RunningRelay
let dir: string
let echo: Example
let echoKeys: KeyPair

interface Example {
  proc: Subprocess<'ignore', 'pipe', 'pipe'>
  out: () => string
  err: () => string
  /** Resolves once standard output matches. */
  until: (re: RegExp, timeoutMs?: number) => Promise<RegExpExecArray>
}

/** A key file in `dir`, as `relay keygen` writes it. */
function keyFile(name: string): { keys: KeyPair; path: string } {
  const keys = generateKeyPair()
  const path = join(dir, name)
  writeFileSync(path, encodeKeyFile(keys), { mode: 0o600 })
  return { keys, path }
}

/** `bun examples/FILE` with the environment the example documents. */
function runExample(file: string, env: Record<string, string>): Example {
  const proc = spawn([process.execPath, join(EXAMPLES, file)], { cwd: dir, env: { PATH: process.env.PATH ?? '', ...env }, stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' })
  let out = ''
  let err = ''
  const waiters: (() => void)[] = []
  const drain = async (stream: ReadableStream<Uint8Array>, add: (s: string) => void) => {
    for await (const chunk of stream as unknown as AsyncIterable<Uint8Array>) {
      add(new TextDecoder().decode(chunk))
      for (const w of waiters.splice(0)) w()
    }
  }
  void drain(proc.stdout, (s) => (out += s))
  void drain(proc.stderr, (s) => (err += s))
  return {
    proc,
    out: () => out,
    err: () => err,
    async until(re, timeoutMs = 15_000) {
      const deadline = Date.now() + timeoutMs
      for (;;) {
        const m = re.exec(out)
        if (m) return m
        if (Date.now() > deadline || proc.exitCode !== null) throw new Error(`${file}: no ${re} on stdout\nstdout: ${out}\nstderr: ${err}`)
        await Promise.race([new Promise<void>((r) => waiters.push(r)), Bun.sleep(100)])
      }
    },
  }
}

/** Polls `client`'s inbox until a message matching `pick` arrives. */
async function receive(client: RelayClient, pick: (m: MessageJson) => boolean, timeoutMs = 15_000): Promise<MessageJson> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const found = (await client.poll({ limit: 50 })).messages.find(pick)
    if (found) return found
    if (Date.now() > deadline) throw new Error('no matching message arrived')
    await Bun.sleep(100)
  }
}

beforeAll(async () => {
  relay = await startBinary(tempDataDir(), { RELAY_WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' })
  dir = tempDir('relay-examples-')
  const k = keyFile('echo.key')
  echoKeys = k.keys
  echo = runExample('echo-agent.ts', { RELAY_URL: relay.url, RELAY_KEY_FILE: k.path })
  await echo.until(new RegExp(`^echo agent ${echoKeys.publicKey} on ${relay.url}$`, 'm'))
}, 120_000)

afterAll(async () => {
  echo?.proc.kill('SIGTERM')
  await echo?.proc.exited
  await relay?.stop()
  if (dir) rmSync(dir, { recursive: true, force: true })
})

describe('examples/echo-agent.ts', () => {
  test('is found by its capability and answers each message with the same body, in the same thread', async () => {
    const alice = new RelayClient({ baseUrl: relay.url, keys: generateKeyPair() })
    const found = await alice.discover({ tag: 'echo' })
    expect(found.agents.map((a) => a.public_key)).toContain(echoKeys.publicKey)
    const body = { text: 'ping', n: 9007199254740993n.toString() }
    const sent = await alice.send({ recipient_key: echoKeys.publicKey, body, thread_id: 'echo-1' })
    const reply = await receive(alice, (m) => m.in_reply_to === sent.message_id)
    expect(reply).toMatchObject({ sender_key: echoKeys.publicKey, body, thread_id: 'echo-1', content_type: 'application/json' })
    await echo.until(new RegExp(`^echoed ${sent.message_id} to ${alice.publicKey} as ${reply.message_id}$`, 'm'))
    // acknowledged once answered: the relay has it delivered
    expect((await alice.messageStatus(sent.message_id)).status).toBe('delivered')
  }, 60_000)

  test('stops cleanly on SIGTERM', async () => {
    const k = keyFile('echo2.key')
    const second = runExample('echo-agent.ts', { RELAY_URL: relay.url, RELAY_KEY_FILE: k.path })
    await second.until(/^echo agent /m)
    second.proc.kill('SIGTERM')
    expect(await second.proc.exited).toBe(0)
    expect(second.out()).toEndWith('stopped\n')
    expect(second.err()).toBe('')
  }, 60_000)
})

describe('examples/webhook-receiver.ts', () => {
  test('registers itself, prints verified deliveries once, refuses forged ones', async () => {
    const k = keyFile('hook.key')
    const port = await freePort()
    const hook = runExample('webhook-receiver.ts', { RELAY_URL: relay.url, RELAY_KEY_FILE: k.path, PORT: String(port) })
    try {
      await hook.until(new RegExp(`^webhook receiver for ${k.keys.publicKey} at http://127\\.0\\.0\\.1:${port}/hook$`, 'm'))
      const alice = new RelayClient({ baseUrl: relay.url, keys: generateKeyPair() })
      const sent = await alice.send({ recipient_key: k.keys.publicKey, body: { text: 'by webhook' } })
      await hook.until(new RegExp(`^from ${alice.publicKey}: \\{"text":"by webhook"\\}$`, 'm'))
      // answered 204: the relay marks the message delivered
      for (let i = 0; (await alice.messageStatus(sent.message_id)).status !== 'delivered'; i++) {
        if (i > 100) throw new Error('the delivery was not acknowledged')
        await Bun.sleep(50)
      }
      // a delivery signed with another secret is refused and not printed
      const forged = JSON.stringify({ delivery_id: 'dlv_000000000000', message: { message_id: 'msg_1_forged', sender_key: alice.publicKey, body: { text: 'forged' } } })
      const res = await fetch(`http://127.0.0.1:${port}/hook`, {
        method: 'POST',
        body: forged,
        headers: { 'content-type': 'application/json', 'x-m2m-webhook-signature': '00'.repeat(32), 'x-m2m-webhook-timestamp': new Date().toISOString() },
      })
      expect(res.status).toBe(401)
      expect(await res.text()).toBe('bad_signature')
      expect(hook.out()).not.toContain('forged')
      expect(hook.err()).toContain('refused a delivery: the signature does not match the body')
    } finally {
      hook.proc.kill('SIGTERM')
      await hook.proc.exited
    }
  }, 60_000)
})

describe('examples/mcp/.mcp.json', () => {
  test('starts relay mcp as a host would; that agent talks to the echo agent', async () => {
    const config = JSON.parse(readFileSync(join(EXAMPLES, 'mcp/.mcp.json'), 'utf8'))
    const server = config.mcpServers.relay
    expect(server).toMatchObject({ command: 'relay', args: ['mcp'] })
    // a project with the configuration and a key file, and `relay` on PATH
    const project = join(dir, 'project')
    const bin = join(dir, 'bin')
    mkdirSync(project)
    mkdirSync(bin)
    symlinkSync(await relayBinary(), join(bin, 'relay'))
    writeFileSync(join(project, '.mcp.json'), JSON.stringify(config))
    const me = generateKeyPair()
    writeFileSync(join(project, server.env.RELAY_KEY_FILE), encodeKeyFile(me), { mode: 0o600 })
    const transport = new StdioClientTransport({
      command: server.command,
      args: server.args,
      // the configuration's environment, with the address of this test's relay (on a free port, not 8080)
      env: { PATH: `${bin}:${process.env.PATH ?? ''}`, ...server.env, RELAY_URL: relay.url },
      cwd: project,
      stderr: 'pipe',
    })
    const client = new Client({ name: 'example-host', version: '1.0.0' })
    await client.connect(transport)
    try {
      const tool = async (name: string, args: Record<string, unknown> = {}) => {
        const r = (await client.callTool({ name, arguments: args }, undefined, { timeout: 60_000 })) as CallToolResult
        if (r.isError) throw new Error(`${name}: ${JSON.stringify(r.content)}`)
        return r.structuredContent as any
      }
      expect((await tool('relay_whoami')).public_key).toBe(me.publicKey)
      const found = await tool('relay_discover', { tags: ['echo'] })
      expect(JSON.stringify(found)).toContain(echoKeys.publicKey)
      const sent = await tool('relay_send', { to: echoKeys.publicKey, text: 'hello from an MCP host' })
      const got = await tool('relay_wait', { in_reply_to: sent.message_id, timeout_s: 20 })
      expect(got.timed_out).toBe(false)
      expect(got.message).toMatchObject({ sender_key: echoKeys.publicKey, body: { text: 'hello from an MCP host' } })
    } finally {
      await client.close()
    }
  }, 60_000)
})
