/**
 * `relay mcp --http`: Streamable HTTP on loopback, one MCP session per client over one bridge, and
 * DNS-rebinding protection (Host and Origin checked before MCP sees the request).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import { rmSync } from 'node:fs'
import { startBinary, tempDataDir, type RunningRelay } from '../e2e/binary.ts'
import { tempDir } from '../support/harness.ts'
import { TOOLS, httpBridge, newAgent, ok, stdioBridge, type Agent, type Bridge, type HttpBridge } from './helpers.ts'

let relay: RunningRelay
let dir: string
let alice: Agent
let bob: Agent
let server: HttpBridge
let a1: Bridge
let a2: Bridge
let b: Bridge

beforeAll(async () => {
  relay = await startBinary(tempDataDir())
  dir = tempDir('relay-mcp-http-')
  alice = newAgent(dir, 'alice')
  bob = newAgent(dir, 'bob')
  server = await httpBridge({ relayUrl: relay.url, agent: alice, cwd: dir, args: ['--allowed-host', 'relay-box.test'] })
  ;[a1, a2, b] = await Promise.all([server.connect(), server.connect(), stdioBridge({ relayUrl: relay.url, agent: bob, cwd: dir })])
}, 120_000)

afterAll(async () => {
  for (const c of [a1, a2, b]) await c?.close().catch(() => {})
  await server?.stop()
  await relay?.stop()
  rmSync(dir, { recursive: true, force: true })
})

describe('Streamable HTTP', () => {
  test('listens on loopback at /mcp and lists the same tools, with the current protocol version', async () => {
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/)
    expect(a1.protocolVersion()).toBe('2025-11-25')
    const { tools } = await a1.client.listTools()
    expect(tools.map((t) => t.name).sort()).toEqual([...TOOLS].sort())
    expect(tools.every((t) => t.outputSchema?.type === 'object')).toBe(true)
  })

  test('two sessions share one agent and one inbox; a subscriber hears of each arrival', async () => {
    expect((await ok(a1, 'relay_whoami')).public_key).toBe(alice.keys.publicKey)
    const updates: string[] = []
    a2.client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => void updates.push(n.params.uri))
    await a2.client.subscribeResource({ uri: 'relay://inbox' })

    const sent = await ok(b, 'relay_send', { to: alice.keys.publicKey, text: 'over http' })
    const waited = await ok(a1, 'relay_wait', { from: bob.keys.publicKey, timeout_s: 20 })
    expect(waited.message.message_id).toBe(sent.message_id)
    const seen = await ok(a2, 'relay_inbox')
    expect(seen.messages.map((m: any) => m.message_id)).toEqual([sent.message_id])
    const deadline = Date.now() + 10_000
    while (updates.length === 0 && Date.now() < deadline) await Bun.sleep(20)
    expect(updates).toEqual(['relay://inbox'])

    const digest = JSON.parse(((await a2.client.readResource({ uri: 'relay://inbox' })).contents[0] as { text: string }).text)
    expect(digest).toMatchObject({ pending_count: 1, senders: [{ sender_key: bob.keys.publicKey, count: 1 }] })
    expect(digest.messages[0]).toMatchObject({ message_id: sent.message_id, preview: 'over http' })
    const one = JSON.parse(((await a1.client.readResource({ uri: `relay://message/${sent.message_id}` })).contents[0] as { text: string }).text)
    expect(one).toMatchObject({ message_id: sent.message_id, status: 'sent' })
    const agent = JSON.parse(((await a1.client.readResource({ uri: `relay://agent/${bob.keys.publicKey}` })).contents[0] as { text: string }).text)
    expect(agent.public_key).toBe(bob.keys.publicKey)

    await ok(a2, 'relay_ack', { message_ids: [sent.message_id] })
    expect((await ok(a1, 'relay_inbox')).pending_count).toBe(0)
    expect((await ok(b, 'relay_message_status', { message_id: sent.message_id })).status).toBe('delivered')
  })
})

describe('DNS-rebinding protection', () => {
  const initialize = (headers: Record<string, string>) =>
    fetch(server.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${server.token}`, ...headers },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }),
    })
  const port = () => new URL(server.url).port

  test('a Host that is not loopback or allowed is refused with 403 before MCP', async () => {
    const res = await initialize({ host: `evil.example:${port()}` })
    expect(res.status).toBe(403)
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain('evil.example')
  })

  test('a browser Origin from elsewhere is refused; a loopback one is not', async () => {
    const evil = await initialize({ origin: 'http://evil.example' })
    expect(evil.status).toBe(403)
    const local = await initialize({ origin: `http://localhost:${port()}` })
    expect(local.status).toBe(200)
    expect(local.headers.get('mcp-session-id')).toBeTruthy()
  })

  test('--allowed-host adds a name; unknown sessions and other paths get 404', async () => {
    const allowed = await initialize({ host: `relay-box.test:${port()}` })
    expect(allowed.status).toBe(200)
    const unknown = await fetch(server.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${server.token}`, 'mcp-session-id': 'no-such-session' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }),
    })
    expect(unknown.status).toBe(404)
    expect((await fetch(server.url.replace('/mcp', '/other'))).status).toBe(404)
  })
})

describe('the bearer token', () => {
  test('without it, or with a wrong one, every request is refused with 401 before MCP', async () => {
    for (const authorization of [undefined, 'Bearer wrong', `Bearer ${server.token}x`, `Basic ${server.token}`, `Bearer ${server.token.slice(0, -1)}`]) {
      const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }
      if (authorization) headers.authorization = authorization
      const res = await fetch(server.url, {
        method: 'POST',
        headers,
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }),
      })
      expect([authorization, res.status]).toEqual([authorization, 401])
      expect(res.headers.get('www-authenticate')).toContain('Bearer')
      expect(res.headers.get('mcp-session-id')).toBeNull()
    }
  })

  test('the token is printed once at start; a given one (RELAY_MCP_TOKEN) is used and not echoed', async () => {
    expect(server.token).toMatch(/^[A-Za-z0-9_-]{43}$/)
    const chosen = 'a-token-the-user-chose-0123456789'
    const other = await httpBridge({ relayUrl: relay.url, agent: alice, cwd: dir, token: chosen, env: { RELAY_MCP_TOKEN: chosen } })
    try {
      expect(other.stderr()).not.toContain(chosen)
      const c = await other.connect()
      expect((await ok(c, 'relay_whoami')).public_key).toBe(alice.keys.publicKey)
      await c.close()
    } finally {
      await other.stop()
    }
  })
})

describe('answers never leak', () => {
  test('a malformed Host is refused with 400 and no stack, path or source', async () => {
    for (const host of ['localhost:1@evil.example', 'localhost:99999999', 'local host', 'localhost/x']) {
      const res = await fetch(server.url, { method: 'POST', headers: { host, authorization: `Bearer ${server.token}`, 'content-type': 'application/json' }, body: '{}' })
      const text = await res.text()
      expect([host, res.status]).toEqual([host, 400])
      expect(text).not.toContain(dir)
      expect(text).not.toMatch(/at \S+ \(|\/src\/|node_modules/)
    }
  })

  test('a Host with userinfo, sent as raw bytes (no client rewrites it), is refused with 400', async () => {
    const { connect } = await import('node:net')
    const port = Number(new URL(server.url).port)
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => {
        const body = '{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
        socket.write(
          `POST /mcp HTTP/1.1\r\nHost: localhost:1@evil.example\r\nAuthorization: Bearer ${server.token}\r\nContent-Type: application/json\r\n` +
            `Accept: application/json, text/event-stream\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
        )
      })
      let data = ''
      socket.on('data', (chunk) => (data += chunk.toString()))
      socket.on('end', () => resolve(data))
      socket.on('error', reject)
    })
    expect(answer).toStartWith('HTTP/1.1 400')
    expect(answer).not.toMatch(/at \S+ \(|\/src\/|node_modules|\/work\//)
  })

  test('a body that is not JSON gets a JSON-RPC error, not a stack', async () => {
    const res = await fetch(server.url, {
      method: 'POST',
      headers: { authorization: `Bearer ${server.token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: '{"jsonrpc": ',
    })
    expect(res.status).toBeGreaterThanOrEqual(400)
    expect(res.status).toBeLessThan(500)
    expect(await res.text()).not.toMatch(/at \S+ \(|\/src\/|node_modules/)
  })
})

describe('the command line', () => {
  test('refuses --http on a non-loopback address without --allow-remote', async () => {
    const { relayBinary } = await import('../e2e/binary.ts')
    const proc = Bun.spawn([await relayBinary(), 'mcp', '--http', '0.0.0.0:0', '--key', alice.keyFile], { cwd: dir, stdout: 'pipe', stderr: 'pipe' })
    expect(await proc.exited).toBe(2)
    expect(await new Response(proc.stderr).text()).toContain('not a loopback address')
  })

  test('refuses --channel over HTTP (hosts start channel servers as a command)', async () => {
    const { relayBinary } = await import('../e2e/binary.ts')
    const proc = Bun.spawn([await relayBinary(), 'mcp', '--http', '127.0.0.1:0', '--channel', '--key', alice.keyFile], { cwd: dir, stdout: 'pipe', stderr: 'pipe' })
    expect(await proc.exited).toBe(2)
    expect(await new Response(proc.stderr).text()).toContain('--channel works over stdio only')
  })
})
