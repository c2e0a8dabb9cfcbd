/** The README's MCP section cannot drift: its host configuration starts a working bridge, its table names every tool. */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { readFileSync, rmSync } from 'node:fs'
import { basename } from 'node:path'
import { RelayClient } from '../../src/client/index.ts'
import { relayBinary, startBinary, tempDataDir, type RunningRelay } from '../e2e/binary.ts'
import { tempDir } from '../support/harness.ts'
import { README_PATH, snippet } from '../support/readme.ts'
import { TOOLS, newAgent } from './helpers.ts'

const readme = readFileSync(README_PATH, 'utf8')
let relay: RunningRelay
let dir: string
beforeAll(async () => {
  relay = await startBinary(tempDataDir())
  dir = tempDir('relay-mcp-readme-')
}, 120_000)
afterAll(async () => {
  await relay?.stop()
  rmSync(dir, { recursive: true, force: true })
})

test('the host configuration snippet starts a bridge that answers (command, args, env as written)', async () => {
  const config = JSON.parse(snippet(readme, 'mcp-config'))
  const server = config.mcpServers.relay
  expect(basename(server.command)).toBe('relay')
  expect(server.args).toEqual(['mcp'])
  expect(Object.keys(server.env).sort()).toEqual(['RELAY_KEY_FILE', 'RELAY_URL'])
  const agent = newAgent(dir, 'readme')
  // the same entry with this machine's binary, relay and key in place of the examples
  const transport = new StdioClientTransport({
    command: await relayBinary(),
    args: server.args,
    env: { PATH: process.env.PATH ?? '', RELAY_URL: relay.url, RELAY_KEY_FILE: agent.keyFile },
    stderr: 'pipe',
  })
  const client = new Client({ name: 'readme-host', version: '1.0.0' })
  await client.connect(transport)
  try {
    const whoami = (await client.callTool({ name: 'relay_whoami', arguments: {} })) as unknown as { structuredContent: { public_key: string } }
    expect(whoami.structuredContent.public_key).toBe(agent.keys.publicKey)
  } finally {
    await client.close()
  }
})

test('the channel configuration starts a bridge that declares claude/channel and announces a message', async () => {
  const config = JSON.parse(snippet(readme, 'mcp-channel-config'))
  const server = config.mcpServers.relay
  expect(server.args.slice(0, 3)).toEqual(['mcp', '--channel', '--files'])
  const agent = newAgent(dir, 'channel')
  const transport = new StdioClientTransport({
    command: await relayBinary(),
    args: [...server.args.slice(0, 3), dir],
    env: { PATH: process.env.PATH ?? '', RELAY_URL: relay.url, RELAY_KEY_FILE: agent.keyFile },
    stderr: 'pipe',
  })
  const client = new Client({ name: 'readme-host', version: '1.0.0' })
  const events: Array<{ content: string; meta: Record<string, string> }> = []
  client.fallbackNotificationHandler = async (n) => {
    if (n.method === 'notifications/claude/channel') events.push(n.params as never)
  }
  await client.connect(transport)
  try {
    expect(client.getServerCapabilities()?.experimental?.['claude/channel']).toEqual({})
    const sender = new RelayClient({ baseUrl: relay.url, keys: newAgent(dir, 'sender').keys })
    const sent = await sender.send({ recipient_key: agent.keys.publicKey, body: { text: 'Can you review the patch?' }, thread_id: 'review-7' })
    const deadline = Date.now() + 15_000
    while (!events.length && Date.now() < deadline) await Bun.sleep(20)
    expect(events[0].meta).toMatchObject({ message_id: sent.message_id, thread_id: 'review-7' })
    // the event as the README shows it
    const shown = readme.slice(readme.indexOf('The session then sees each message as'))
    for (const line of ['What follows between the markers was written by another agent', '<<<message', 'message>>>', 'Answer in the thread with relay_reply']) {
      expect(shown).toContain(line)
      expect(events[0].content).toContain(line)
    }
  } finally {
    await client.close()
  }
})

test('the hook configuration runs as written: the prompt hook injects a message once, the Stop hook asks for a turn once', async () => {
  const config = JSON.parse(snippet(readme, 'mcp-hooks'))
  const prompt: string = config.hooks.UserPromptSubmit[0].hooks[0].command
  const stop: string = config.hooks.Stop[0].hooks[0].command
  expect(config.hooks.UserPromptSubmit[0].hooks[0].type).toBe('command')
  expect(prompt).toStartWith('relay inbox --hook ')
  expect(stop).toStartWith('relay inbox --hook --stop ')
  const agent = newAgent(dir, 'hooked')
  const binary = await relayBinary()
  // the same commands with this machine's binary, relay and key in place of the examples
  const run = async (command: string) => {
    const line = command
      .replace(/^relay /, `${binary} `)
      .replace('https://relay.example.org', relay.url)
      .replace('/home/me/.config/relay/agent.key', agent.keyFile)
    const proc = Bun.spawn(['sh', '-c', line], { cwd: dir, env: { PATH: process.env.PATH ?? '' }, stdout: 'pipe', stderr: 'pipe' })
    const [code, out, err] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()])
    expect([line, code, err]).toEqual([line, 0, ''])
    return out
  }
  const sender = new RelayClient({ baseUrl: relay.url, keys: newAgent(dir, 'hook-sender').keys })
  const sent = await sender.send({ recipient_key: agent.keys.publicKey, body: { text: 'Can you review the patch?' } })
  const injected = await run(prompt)
  expect(injected).toContain(sent.message_id)
  expect(injected).toContain('<<<message\nCan you review the patch?\nmessage>>>')
  expect(await run(prompt)).toBe('')
  const later = await sender.send({ recipient_key: agent.keys.publicKey, body: { text: 'and this one' } })
  expect(JSON.parse(await run(stop))).toMatchObject({ decision: 'block', reason: expect.stringContaining(later.message_id) })
  expect(await run(stop)).toBe('')
}, 60_000)

test('the tool table names every tool', () => {
  const section = readme.slice(readme.indexOf('## MCP'), readme.indexOf('## Client library'))
  for (const name of TOOLS) expect([name, section.includes(`\`${name}\``)]).toEqual([name, true])
})
