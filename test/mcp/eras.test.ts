/**
 * Both protocol eras against the compiled binary, on both transports: a 2025-11-25 host (the 1.x SDK's
 * client, initialize handshake, resources/subscribe) and a 2026-07-28 host (the 2.x client pinned to
 * the new revision: no handshake, subscriptions/listen) each list the tools, call every one, subscribe
 * to the inbox and hear of each new message once.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { startBinary, tempDataDir, type RunningRelay } from '../e2e/binary.ts'
import { tempDir } from '../support/harness.ts'
import { TOOLS, callAny, httpBridge, modernHttpBridge, modernStdioBridge, newAgent, ok, stdioBridge, type Agent, type Bridge, type HttpBridge } from './helpers.ts'

interface Host {
  version: string | undefined
  listTools(): Promise<Array<{ name: string; inputSchema: { type: string }; outputSchema?: { type: string } }>>
  call(name: string, args?: Record<string, unknown>): Promise<CallToolResult>
  subscribeInbox(onUpdate: (uri: string) => void): Promise<void>
  close(): Promise<void>
}

let relay: RunningRelay
let dir: string
let peer: Agent
let p: Bridge
const servers: HttpBridge[] = []

beforeAll(async () => {
  relay = await startBinary(tempDataDir())
  dir = tempDir('relay-mcp-eras-')
  peer = newAgent(dir, 'peer')
  p = await stdioBridge({ relayUrl: relay.url, agent: peer, cwd: dir })
}, 120_000)

afterAll(async () => {
  await p?.close().catch(() => {})
  for (const s of servers) await s.stop()
  await relay?.stop()
  rmSync(dir, { recursive: true, force: true })
})

async function legacyHost(transport: 'stdio' | 'http', agent: Agent, cwd: string): Promise<Host> {
  let b: Bridge
  if (transport === 'stdio') b = await stdioBridge({ relayUrl: relay.url, agent, cwd })
  else {
    const server = await httpBridge({ relayUrl: relay.url, agent, cwd })
    servers.push(server)
    b = await server.connect()
  }
  return {
    version: b.protocolVersion(),
    listTools: async () => (await b.client.listTools()).tools as never,
    call: (name, args = {}) => callAny(b.client, name, args),
    async subscribeInbox(onUpdate) {
      b.client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => void onUpdate(n.params.uri))
      await b.client.subscribeResource({ uri: 'relay://inbox' })
    },
    close: () => b.close(),
  }
}

async function modernHost(transport: 'stdio' | 'http', agent: Agent, cwd: string): Promise<Host> {
  let b
  if (transport === 'stdio') b = await modernStdioBridge({ relayUrl: relay.url, agent, cwd })
  else {
    const server = await httpBridge({ relayUrl: relay.url, agent, cwd })
    servers.push(server)
    b = await modernHttpBridge(server)
  }
  expect(b.era()).toBe('modern')
  const client = b.client
  return {
    version: b.protocolVersion(),
    listTools: async () => (await client.listTools()).tools as never,
    call: (name, args = {}) => callAny(client, name, args),
    async subscribeInbox(onUpdate) {
      client.setNotificationHandler('notifications/resources/updated', (n) => void onUpdate(n.params.uri))
      const sub = await client.listen({ resourceSubscriptions: ['relay://inbox'] })
      expect(sub.honoredFilter.resourceSubscriptions).toEqual(['relay://inbox'])
    },
    close: () => b.close(),
  }
}

const CASES = [
  { era: '2025-11-25', transport: 'stdio', open: legacyHost },
  { era: '2025-11-25', transport: 'http', open: legacyHost },
  { era: '2026-07-28', transport: 'stdio', open: modernHost },
  { era: '2026-07-28', transport: 'http', open: modernHost },
] as const

for (const c of CASES) {
  describe(`a ${c.era} host over ${c.transport}`, () => {
    let host: Host
    let me: Agent
    let cwd: string
    const tag = `era-${c.era.replace(/-/g, '')}-${c.transport}`

    beforeAll(async () => {
      cwd = join(dir, tag)
      mkdirSync(cwd)
      me = newAgent(cwd, 'me')
      host = await c.open(c.transport, me, cwd)
    }, 60_000)
    afterAll(async () => {
      await host?.close().catch(() => {})
    })

    const must = async (name: string, args: Record<string, unknown> = {}) => {
      const r = await host.call(name, args)
      if (r.isError) throw new Error(`${name} failed: ${JSON.stringify(r.content)}`)
      called.add(name)
      return r.structuredContent as any
    }
    const called = new Set<string>()

    test('speaks its revision and lists every tool with its schemas', async () => {
      expect(host.version).toBe(c.era)
      const tools = await host.listTools()
      expect(tools.map((t) => t.name).sort()).toEqual([...TOOLS].sort())
      for (const t of tools) expect([t.name, t.inputSchema.type, t.outputSchema?.type]).toEqual([t.name, 'object', 'object'])
    })

    test('calls every tool', async () => {
      expect((await must('relay_whoami')).public_key).toBe(me.keys.publicKey)
      await must('relay_update_profile', { display_name: tag, visibility: 'public', capabilities: [{ name: 'echo', tags: [tag] }] })
      expect((await must('relay_discover', { tags: [tag] })).agents.map((a: any) => a.public_key)).toEqual([me.keys.publicKey])
      expect((await must('relay_capabilities', { prefix: tag })).capabilities).toEqual([{ tag, agent_count: 1 }])
      expect((await must('relay_get_agent', { public_key: peer.keys.publicKey })).agent.public_key).toBe(peer.keys.publicKey)

      writeFileSync(join(cwd, 'note.txt'), `note from ${tag}\n`)
      const blob = await must('relay_upload', { path: 'note.txt' })
      const sent = await must('relay_send', { to: peer.keys.publicKey, text: `hello from ${tag}`, thread_id: tag, attachments: [{ blob_id: blob.blob_id, filename: 'note.txt' }] })
      expect((await must('relay_message_status', { message_id: sent.message_id })).status).toBe('sent')
      expect((await must('relay_get_message', { message_id: sent.message_id })).message.message_id).toBe(sent.message_id)

      const got = await ok(p, 'relay_wait', { from: me.keys.publicKey, timeout_s: 20 })
      expect(got.message.message_id).toBe(sent.message_id)
      await ok(p, 'relay_reply', { message_id: sent.message_id, text: `back to ${tag}` })
      await ok(p, 'relay_ack', { message_ids: [sent.message_id] })

      const reply = (await must('relay_wait', { in_reply_to: sent.message_id, timeout_s: 20 })).message
      expect(reply.body).toEqual({ text: `back to ${tag}` })
      expect((await must('relay_inbox')).messages.map((m: any) => m.message_id)).toEqual([reply.message_id])
      expect(reply.thread_id).toBe(tag)
      expect((await must('relay_thread', { thread_id: tag })).messages.length).toBe(2)
      await must('relay_reply', { message_id: reply.message_id, text: 'thanks' })
      const file = await must('relay_download', { blob_id: blob.blob_id, path: 'copy.txt' })
      expect(readFileSync(file.path, 'utf8')).toBe(`note from ${tag}\n`)
      expect((await must('relay_ack', { message_ids: [reply.message_id] })).acked).toEqual([reply.message_id])

      await must('relay_acl_set', { peer_key: peer.keys.publicKey, entry_type: 'allow' })
      expect((await must('relay_acl_list')).entries.map((e: any) => e.peer_key)).toEqual([peer.keys.publicKey])
      expect((await must('relay_acl_delete', { peer_key: peer.keys.publicKey })).deleted).toBe(true)
      // the peer's thanks, so the next test starts from an empty inbox
      const thanks = await ok(p, 'relay_wait', { from: me.keys.publicKey, timeout_s: 20 })
      await ok(p, 'relay_ack', { message_ids: [thanks.message.message_id] })
      expect([...called].sort()).toEqual([...TOOLS].sort())
    }, 60_000)

    test('subscribes to the inbox and hears of each new message once', async () => {
      const updates: string[] = []
      await host.subscribeInbox((uri) => updates.push(uri))
      const ids: string[] = []
      for (let i = 0; i < 3; i++) {
        ids.push((await ok(p, 'relay_send', { to: me.keys.publicKey, text: `ping ${i}` })).message_id)
        const deadline = Date.now() + 10_000
        while (updates.length < i + 1 && Date.now() < deadline) await Bun.sleep(10)
      }
      await Bun.sleep(300)
      expect(updates).toEqual(['relay://inbox', 'relay://inbox', 'relay://inbox'])
      expect((await must('relay_inbox')).messages.map((m: any) => m.message_id)).toEqual(ids)
      await must('relay_ack', { message_ids: ids })
    }, 60_000)
  })
}
