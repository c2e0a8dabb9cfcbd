/**
 * `relay mcp`: the relay as MCP tools for an LLM host. Signs locally with the agent's key file and talks
 * to the relay over its HTTP API and WebSocket; serves MCP on stdio (the default: the host starts the
 * command) or, with --http, as Streamable HTTP on a loopback address. Logs go to standard error only:
 * standard output belongs to the protocol.
 */
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js'
import { UsageError, parseArgs } from '../cli/args.ts'
import { DEFAULT_KEY_FILE, DEFAULT_RELAY_URL, readKeyFile } from '../cli/client-cli.ts'
import { Bridge } from './bridge.ts'
import { serveHttp } from './http.ts'
import { createMcpServer } from './server.ts'

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
  --allow-remote           allow --http on an address other than loopback (anyone who reaches it acts as you)
  --download-dir DIR       where relay_download writes without a path (default: a directory under the temp dir)

Tools: relay_whoami, relay_update_profile, relay_discover, relay_capabilities, relay_get_agent, relay_send,
relay_reply, relay_inbox, relay_ack, relay_wait, relay_get_message, relay_thread, relay_message_status,
relay_upload, relay_download, relay_acl_list, relay_acl_set, relay_acl_delete.
Resources: relay://inbox (subscribe for notifications), relay://message/{id}, relay://thread/{id}, relay://agent/{key}.

The inbox holds what you received and have not acknowledged; reading it changes nothing and relay_ack is
the only way out, so nothing is lost if the host or the bridge stops. Messages arrive over the relay's
WebSocket; while it cannot be reached the bridge retries with backoff (it never polls, which would mark
messages delivered before they are handled).
`

export const MCP_FLAGS = ['relay', 'key', 'http', 'allowed-host', 'allowed-origin', 'download-dir']
export const MCP_BOOLEANS = ['allow-remote']

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

/** Runs until the host disconnects (stdio) or the process is stopped; resolves with the exit code. */
export async function runMcp(argv: string[], io: McpIo): Promise<number> {
  const { positionals, flags, lists } = parseArgs(argv, { known: MCP_FLAGS, booleans: MCP_BOOLEANS })
  if (positionals.length) throw new UsageError(`unexpected argument "${positionals[0]}"`)
  const relayUrl = (flags.relay ?? io.env.RELAY_URL ?? DEFAULT_RELAY_URL).replace(/\/+$/, '')
  if (!/^https?:\/\/[^\s]+$/.test(relayUrl)) throw new UsageError(`--relay must be an http:// or https:// URL, got "${relayUrl}"`)
  const listen = flags.http !== undefined ? parseListen(flags.http) : null
  if (listen && !isLoopback(listen.host) && flags['allow-remote'] !== 'true') {
    throw new UsageError(`--http ${flags.http} is not a loopback address: whoever reaches it acts as your agent; add --allow-remote if that is what you want`)
  }
  const keys = readKeyFile(resolve(io.cwd, flags.key ?? io.env.RELAY_KEY_FILE ?? DEFAULT_KEY_FILE), (line) => void io.stderr.write(`relay mcp: ${line}`))
  const log = (line: string) => void io.stderr.write(`relay mcp: ${line}\n`)
  const bridge = new Bridge({
    relayUrl,
    keys,
    cwd: io.cwd,
    downloadDir: flags['download-dir'] ? resolve(io.cwd, flags['download-dir']) : join(tmpdir(), `relay-mcp-downloads-${keys.publicKey.slice(0, 8)}`),
    inbox: { log },
  })
  log(`agent ${keys.publicKey} on ${relayUrl}`)
  bridge.start()
  try {
    if (listen) {
      const http = await serveHttp(bridge, { ...listen, allowedHosts: lists['allowed-host'], allowedOrigins: lists['allowed-origin'], log })
      log(`listening on ${http.url}`)
      await io.stopped
      await http.stop()
    } else {
      const { server, dispose } = createMcpServer(bridge)
      const transport = new StdioServerTransport(io.stdin as never, io.stdout as never)
      const closed = new Promise<void>((done) => {
        // the host closing our standard input is the end of the session
        io.stdin.once('end', done)
        io.stdin.once('close', done)
        server.server.onclose = done
      })
      await server.connect(transport)
      await Promise.race([closed, io.stopped])
      dispose()
      await server.close().catch(() => {})
    }
  } finally {
    await bridge.close()
  }
  return 0
}
