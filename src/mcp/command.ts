/**
 * `relay mcp`: the relay as MCP tools for an LLM host. Signs locally with the agent's key file and talks
 * to the relay over its HTTP API and WebSocket; serves MCP on stdio (the default: the host starts the
 * command) or, with --http, as Streamable HTTP on a loopback address. Logs go to standard error only:
 * standard output belongs to the protocol.
 */
import { resolve } from 'node:path'
import { McpServer } from '@modelcontextprotocol/server'
import { StdioServerTransport, serveStdio } from '@modelcontextprotocol/server/stdio'
import { z } from 'zod'
import type { KeyPair } from '../client/index.ts'
import { VERSION } from '../version.ts'
import { UsageError, parseArgs } from '../cli/args.ts'
import { DEFAULT_KEY_FILE, DEFAULT_RELAY_URL, readKeyFile } from '../cli/client-cli.ts'
import { Bridge } from './bridge.ts'
import { FilePolicy } from './file-policy.ts'
import { serveHttp } from './http.ts'
import { createMcpServer } from './server.ts'
import { setRelayUrl } from './tool.ts'

export const MCP_HELP = `relay mcp [--relay URL] [--key FILE] [--http HOST:PORT] — the relay as MCP tools for an LLM host

Serves the Model Context Protocol on standard input and output (the host starts this command), or with
--http as Streamable HTTP at http://HOST:PORT/mcp. Requests are signed here with your key file; the
private key never leaves this machine.

Flags:
  --relay URL              relay address (env RELAY_URL, default ${DEFAULT_RELAY_URL})
  --key FILE               your key file: from relay keygen, or an MRP tool's seed (raw 32 bytes, hex or base64)
                           (env RELAY_KEY_FILE, default ./${DEFAULT_KEY_FILE})
  --http HOST:PORT         serve Streamable HTTP instead of stdio; HOST defaults to 127.0.0.1, PORT 0 picks one
  --allowed-host NAME      a further Host name to accept over HTTP (repeatable; loopback names always are)
  --allowed-origin ORIGIN  a further browser Origin to accept over HTTP (repeatable)
  --token TOKEN            the bearer token HTTP clients must send (env RELAY_MCP_TOKEN; default: a new
                           one, printed on standard error at start)
  --channel                push each inbox message into the host's session as a notifications/claude/channel
                           event (Claude Code channels; stdio only): an idle agent wakes up on a message
  --allow-remote           allow --http on an address other than loopback (anyone who reaches it acts as you)
  --files DIR              a directory the tools may read (uploads, attachments) and write (downloads) in;
                           repeatable; the first one takes downloads without a path. Default: a private
                           directory (mode 0700) under \$XDG_DATA_HOME, ~/.local/share/agent-relay/mcp-files
  --allow-overwrite        let relay_download replace an existing file when the call asks for it

Tools: relay_whoami, relay_update_profile, relay_discover, relay_capabilities, relay_get_agent, relay_send,
relay_reply, relay_inbox, relay_ack, relay_wait, relay_get_message, relay_thread, relay_message_status,
relay_upload, relay_download, relay_acl_list, relay_acl_set, relay_acl_delete.
Resources: relay://inbox (subscribe for notifications), relay://message/{id}, relay://thread/{id}, relay://agent/{key}.

The inbox holds what you received and have not acknowledged; reading it changes nothing and relay_ack is
the only way out, so nothing is lost if the host or the bridge stops. Messages arrive over the relay's
WebSocket; while it cannot be reached the bridge retries with backoff (it never polls, which would mark
messages delivered before they are handled).
`

export const MCP_FLAGS = ['relay', 'key', 'http', 'allowed-host', 'allowed-origin', 'files', 'token']
export const MCP_BOOLEANS = ['allow-remote', 'allow-overwrite', 'channel']

export interface McpIo {
  env: Record<string, string | undefined>
  cwd: string
  stdin: NodeJS.ReadableStream
  stdout: NodeJS.WritableStream
  stderr: { write(s: string): unknown }
  /** Resolves when the process is asked to stop (SIGINT, SIGTERM). */
  stopped: Promise<unknown>
}

/** `HOST:PORT`, `:PORT`, `PORT` or `[IPv6]:PORT`; the host defaults to loopback. */
export function parseListen(value: string): { host: string; port: number } {
  const m = /^(?:(\[[0-9a-fA-F:.]+\]|[^:[\]]*):)?(\d{1,5})$/.exec(value.trim())
  const port = m ? Number(m[2]) : NaN
  if (!m || port > 65535) throw new UsageError(`--http must be HOST:PORT, :PORT or PORT, got "${value}"`)
  const host = m[1] ? m[1].replace(/^\[(.*)\]$/, '$1') : '127.0.0.1'
  return { host, port }
}

export function isLoopback(host: string): boolean {
  const h = host.toLowerCase()
  return h === 'localhost' || h === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h)
}

/** An MCP server that only explains why relay mcp cannot work yet, for the host to show. */
async function serveUnconfigured(message: string, io: McpIo, closed: Promise<void>): Promise<void> {
  const text = `relay mcp is not set up: ${message}. Tell the user; nothing on the relay can be done until it is fixed.`
  const handle = serveStdio(
    () => {
      const server = new McpServer({ name: 'agent-relay', title: 'Agent Relay (not set up)', version: VERSION }, { capabilities: { tools: {} }, instructions: text })
      server.registerTool(
        'relay_whoami',
        { title: 'Who am I on the relay', description: `Not available: ${text}`, inputSchema: z.object({}), annotations: { readOnlyHint: true } },
        async () => ({ isError: true, content: [{ type: 'text', text }] }),
      )
      return server
    },
    { transport: new StdioServerTransport(io.stdin as never, io.stdout as never) },
  )
  await Promise.race([closed, io.stopped])
  await handle.close().catch(() => {})
}

/** Runs until the host disconnects (stdio) or the process is stopped; resolves with the exit code. */
export async function runMcp(argv: string[], io: McpIo): Promise<number> {
  const { positionals, flags, lists } = parseArgs(argv, { known: MCP_FLAGS, booleans: MCP_BOOLEANS })
  // the host closing our standard input is the end of the session; listened for before any await, so
  // an early close is not missed
  const stdinClosed = new Promise<void>((done) => {
    io.stdin.once('end', done)
    io.stdin.once('close', done)
  })
  if (positionals.length) throw new UsageError(`unexpected argument "${positionals[0]}"`)
  const relayUrl = (flags.relay ?? io.env.RELAY_URL ?? DEFAULT_RELAY_URL).replace(/\/+$/, '')
  if (!/^https?:\/\/[^\s]+$/.test(relayUrl)) throw new UsageError(`--relay must be an http:// or https:// URL, got "${relayUrl}"`)
  const listen = flags.http !== undefined ? parseListen(flags.http) : null
  if (listen && !isLoopback(listen.host) && flags['allow-remote'] !== 'true') {
    throw new UsageError(`--http ${flags.http} is not a loopback address: whoever reaches it acts as your agent; add --allow-remote if that is what you want`)
  }
  const keyFile = resolve(io.cwd, flags.key ?? io.env.RELAY_KEY_FILE ?? DEFAULT_KEY_FILE)
  const log = (line: string) => void io.stderr.write(`relay mcp: ${line}\n`)
  let keys: KeyPair
  let files: FilePolicy
  try {
    keys = readKeyFile(keyFile, (line) => void io.stderr.write(`relay mcp: ${line}`))
    files = await FilePolicy.create({
      roots: (lists.files ?? []).map((d) => resolve(io.cwd, d)),
      keyFile,
      seed: keys.seed,
      allowOverwrite: flags['allow-overwrite'] === 'true',
      env: io.env,
    })
  } catch (err) {
    // a host that starts us and sees the process exit only says "connection closed": over stdio, stay
    // up and say what is wrong to the host and its model instead
    if (listen) throw err
    const message = (err as Error).message
    log(`not set up: ${message}`)
    await serveUnconfigured(message, io, stdinClosed)
    return 1
  }
  const channel = flags.channel === 'true'
  if (channel && listen) throw new UsageError('--channel works over stdio only (hosts start channel servers as a command)')
  const bridge = new Bridge({ relayUrl, keys, files, inbox: { log }, publishEncryption: io.env.RELAY_PUBLISH_ENCRYPTION !== 'false' })
  log(`agent ${keys.publicKey} on ${relayUrl}`)
  const hint = setRelayUrl(relayUrl)
  if (hint) log(`warning: ${hint}`)
  log(`files: ${files.roots.join(', ')}${files.isDefault ? ' (the default; --files DIR to choose)' : ''}${files.allowOverwrite ? ', may overwrite' : ''}`)
  bridge.start()
  try {
    if (listen) {
      const given = flags.token ?? io.env.RELAY_MCP_TOKEN
      if (given !== undefined && given.length < 16) throw new UsageError('--token must be at least 16 characters')
      const http = await serveHttp(bridge, { ...listen, allowedHosts: lists['allowed-host'], allowedOrigins: lists['allowed-origin'], token: given, log })
      // the generated token is printed once, for the user to give the host; a given one is not echoed
      if (given === undefined) log(`bearer token: ${http.token} (send Authorization: Bearer TOKEN; --token or RELAY_MCP_TOKEN to choose one)`)
      log(`listening on ${http.url}`)
      await io.stopped
      await http.stop()
    } else {
      // one instance per connection, of the era the host opened it with (2025 handshake or 2026-07-28)
      const disposers: Array<() => void> = []
      const handle = serveStdio(
        (ctx) => {
          const { server, dispose } = createMcpServer(bridge, { era: ctx.era, arrivals: true, channel, log })
          disposers.push(dispose)
          return server
        },
        { transport: new StdioServerTransport(io.stdin as never, io.stdout as never), onerror: (err) => log(`MCP error: ${err.message}`) },
      )
      if (channel) log('channel: one notifications/claude/channel event per inbox message')
      await Promise.race([stdinClosed, io.stopped])
      for (const dispose of disposers) dispose()
      await handle.close().catch(() => {})
    }
  } finally {
    await bridge.close()
  }
  return 0
}
