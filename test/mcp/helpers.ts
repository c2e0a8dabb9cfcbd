/**
 * Drives `relay mcp` as an MCP host would: the SDK's Client over stdio (the compiled binary started as a
 * child process) or over Streamable HTTP, against the compiled relay on a temp data directory.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { Client as ModernClient, StreamableHTTPClientTransport as ModernHttpTransport } from '@modelcontextprotocol/client'
import { StdioClientTransport as ModernStdioTransport } from '@modelcontextprotocol/client/stdio'
import { spawn } from 'bun'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { encodeKeyFile, generateKeyPair, type KeyPair } from '../../src/auth/sign.ts'
import { relayBinary } from '../e2e/binary.ts'

/** Every tool of relay mcp, by the names prompts rely on. */
export const TOOLS = [
  'relay_whoami',
  'relay_update_profile',
  'relay_discover',
  'relay_capabilities',
  'relay_get_agent',
  'relay_send',
  'relay_reply',
  'relay_inbox',
  'relay_ack',
  'relay_wait',
  'relay_get_message',
  'relay_thread',
  'relay_message_status',
  'relay_upload',
  'relay_download',
  'relay_acl_list',
  'relay_acl_set',
  'relay_acl_delete',
]

export interface Agent {
  keys: KeyPair
  keyFile: string
}

/** A key file for a new agent in `dir`. */
export function newAgent(dir: string, name: string): Agent {
  const keys = generateKeyPair()
  const keyFile = join(dir, `${name}.key`)
  writeFileSync(keyFile, encodeKeyFile(keys), { mode: 0o600 })
  return { keys, keyFile }
}

export interface Bridge {
  client: Client
  /** What the bridge printed on standard error. */
  stderr: () => string
  /** The protocol version the two sides agreed on. */
  protocolVersion: () => string | undefined
  close(): Promise<void>
}

/** The test's directory is the files directory, unless the test chooses its own (or the default: defaultFiles). */
const filesArgs = (opts: { cwd: string; args?: string[]; defaultFiles?: boolean }) => (opts.defaultFiles || opts.args?.includes('--files') ? [] : ['--files', opts.cwd])

/**
 * `relay mcp` over stdio, as a host starts it: command, args, env (XDG_DATA_HOME is CWD/.xdg unless env
 * says). `binary` runs another build of the relay (default: the one relayBinary() builds).
 */
export async function stdioBridge(opts: { relayUrl: string; agent: Agent; cwd: string; args?: string[]; env?: Record<string, string>; defaultFiles?: boolean; binary?: string }): Promise<Bridge> {
  const command = opts.binary ?? (await relayBinary())
  const transport = new StdioClientTransport({
    command,
    args: ['mcp', ...filesArgs(opts), ...(opts.args ?? [])],
    env: { PATH: process.env.PATH ?? '', RELAY_URL: opts.relayUrl, RELAY_KEY_FILE: opts.agent.keyFile, XDG_DATA_HOME: join(opts.cwd, '.xdg'), ...opts.env },
    cwd: opts.cwd,
    stderr: 'pipe',
  })
  let err = ''
  transport.stderr?.on('data', (chunk: Buffer) => (err += chunk.toString()))
  return connect(transport, () => err)
}

async function connect(transport: Transport, stderr: () => string): Promise<Bridge> {
  let version: string | undefined
  const original = transport.setProtocolVersion?.bind(transport)
  transport.setProtocolVersion = (v: string) => {
    version = v
    original?.(v)
  }
  const client = new Client({ name: 'relay-test-host', version: '1.0.0' })
  try {
    await client.connect(transport)
  } catch (err) {
    throw new Error(`cannot connect to relay mcp: ${(err as Error).message}\n${stderr()}`)
  }
  return { client, stderr, protocolVersion: () => version, close: () => client.close() }
}

export interface HttpBridge {
  url: string
  /** The bearer token the bridge printed (or was given). */
  token: string
  stderr: () => string
  connect(): Promise<Bridge>
  stop(): Promise<number>
}

/** `relay mcp --http 127.0.0.1:0`: waits for the line that names the URL. */
export async function httpBridge(opts: { relayUrl: string; agent: Agent; cwd: string; args?: string[]; token?: string; env?: Record<string, string> }): Promise<HttpBridge> {
  const command = await relayBinary()
  const proc = spawn([command, 'mcp', '--http', '127.0.0.1:0', '--relay', opts.relayUrl, '--key', opts.agent.keyFile, ...filesArgs(opts), ...(opts.args ?? [])], {
    cwd: opts.cwd,
    env: { PATH: process.env.PATH ?? '', XDG_DATA_HOME: join(opts.cwd, '.xdg'), ...opts.env },
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: 'pipe',
  })
  let err = ''
  let resolveUrl: (url: string) => void = () => {}
  const listening = new Promise<string>((resolve) => (resolveUrl = resolve))
  void (async () => {
    for await (const chunk of proc.stderr as unknown as AsyncIterable<Uint8Array>) {
      err += new TextDecoder().decode(chunk)
      const m = /listening on (http:\/\/\S+)/.exec(err)
      if (m) resolveUrl(m[1])
    }
  })()
  const url = await Promise.race([
    listening,
    proc.exited.then((code) => {
      throw new Error(`relay mcp --http exited with ${code}: ${err}`)
    }),
    Bun.sleep(15_000).then(() => {
      throw new Error(`relay mcp --http did not listen within 15 s: ${err}`)
    }),
  ])
  const token = /bearer token: (\S+)/.exec(err)?.[1] ?? opts.token
  if (!token) throw new Error(`relay mcp --http printed no bearer token: ${err}`)
  return {
    url,
    token,
    stderr: () => err,
    connect: () => connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${token}` } } }), () => err),
    async stop() {
      proc.kill('SIGTERM')
      return proc.exited
    },
  }
}

/** Calls a tool and returns its result as it came. */
export async function call(b: Bridge, name: string, args: Record<string, unknown> = {}): Promise<CallToolResult> {
  return (await b.client.callTool({ name, arguments: args }, undefined, { timeout: 120_000 })) as CallToolResult
}

/** Calls a tool that must succeed and returns its structured result. */
export async function ok<T = any>(b: Bridge, name: string, args: Record<string, unknown> = {}): Promise<T> {
  const r = await call(b, name, args)
  if (r.isError) throw new Error(`${name} failed: ${JSON.stringify(r.content)}`)
  return r.structuredContent as T
}

/** The text of a result's first content block. */
export const textOf = (r: CallToolResult): string => (r.content[0] as { text: string }).text

/** Waits (bounded) until the bridge holds `count` pending messages; returns the inbox page. */
export async function untilPending(b: Bridge, count: number, timeoutMs = 15_000): Promise<any> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const inbox = await ok(b, 'relay_inbox', { limit: 100 })
    if (inbox.pending_count === count) return inbox
    if (Date.now() > deadline) throw new Error(`expected ${count} pending messages, have ${inbox.pending_count}`)
    await Bun.sleep(50)
  }
}

/**
 * The same bridge driven by the 2.x client in its 2026-07-28 mode (pinned: no handshake, no session,
 * the version in every request's _meta): over stdio, or over HTTP with the bridge's token.
 */
export interface ModernBridge {
  client: ModernClient
  stderr: () => string
  era: () => string | undefined
  protocolVersion: () => string | undefined
  close(): Promise<void>
}

const MODERN = { versionNegotiation: { mode: { pin: '2026-07-28' } } } as const

async function connectModern(transport: ModernStdioTransport | ModernHttpTransport, stderr: () => string): Promise<ModernBridge> {
  const client = new ModernClient({ name: 'relay-test-host-2026', version: '1.0.0' }, MODERN as never)
  try {
    await client.connect(transport)
  } catch (err) {
    throw new Error(`cannot connect to relay mcp (2026-07-28): ${(err as Error).message}\n${stderr()}`)
  }
  return { client, stderr, era: () => client.getProtocolEra(), protocolVersion: () => client.getNegotiatedProtocolVersion(), close: () => client.close() }
}

export async function modernStdioBridge(opts: { relayUrl: string; agent: Agent; cwd: string; args?: string[] }): Promise<ModernBridge> {
  const transport = new ModernStdioTransport({
    command: await relayBinary(),
    args: ['mcp', ...filesArgs(opts), ...(opts.args ?? [])],
    env: { PATH: process.env.PATH ?? '', RELAY_URL: opts.relayUrl, RELAY_KEY_FILE: opts.agent.keyFile, XDG_DATA_HOME: join(opts.cwd, '.xdg') },
    cwd: opts.cwd,
    stderr: 'pipe',
  })
  let err = ''
  transport.stderr?.on('data', (chunk: Buffer) => (err += chunk.toString()))
  return connectModern(transport, () => err)
}

export function modernHttpBridge(server: HttpBridge): Promise<ModernBridge> {
  const transport = new ModernHttpTransport(new URL(server.url), { requestInit: { headers: { authorization: `Bearer ${server.token}` } } })
  return connectModern(transport, server.stderr)
}

/** A tool call through either client, its result as it came. */
export async function callAny(client: Client | ModernClient, name: string, args: Record<string, unknown> = {}): Promise<CallToolResult> {
  return (await (client as Client).callTool({ name, arguments: args }, undefined, { timeout: 120_000 })) as CallToolResult
}
