/**
 * `relay mcp --http HOST:PORT`: the bridge as a Streamable HTTP MCP endpoint at http://HOST:PORT/mcp,
 * one MCP session per 2025-era client over the one shared bridge, and the 2026-07-28 revision (no
 * sessions: each request stands alone, notifications on subscriptions/listen streams) on the same path. Whoever reaches it acts as this agent, so it
 * listens on loopback unless told otherwise, and it protects against DNS rebinding: a request whose Host
 * (or, from a browser, Origin) is not one of the allowed names is refused before it reaches MCP. Every
 * request carries a bearer token (given, or generated at start and printed once on standard error), so
 * another local user or a page in a browser cannot act as the agent.
 */
import { createHash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto'
import { WebStandardStreamableHTTPServerTransport, createMcpHandler, isLegacyRequest } from '@modelcontextprotocol/server'
import type { Bridge } from './bridge.ts'
import { INBOX_URI } from './resources.ts'
import { createMcpServer } from './server.ts'

export const MCP_PATH = '/mcp'

export interface HttpOptions {
  host: string
  port: number
  /** Host names accepted besides localhost, 127.0.0.1, [::1] and the listen address. */
  allowedHosts?: string[]
  /** Origins accepted besides http://localhost:PORT, http://127.0.0.1:PORT, http://[::1]:PORT and the listen address. */
  allowedOrigins?: string[]
  /** The bearer token clients must send; generated when not given. */
  token?: string
  log?: (line: string) => void
}

/** A fresh bearer token: 32 random bytes, base64url. */
export const generateToken = () => randomBytes(32).toString('base64url')

/** Compares in constant time whatever the lengths (both sides hashed first). */
export function tokenMatches(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given).digest()
  const b = createHash('sha256').update(expected).digest()
  return timingSafeEqual(a, b)
}

/** A Host header as RFC 9110 allows it: a name or an address, an optional port, nothing else. */
const HOST_HEADER = /^(?:\[[0-9a-f:.]+\]|[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?)(?::\d{1,5})?$/i

export interface RunningHttp {
  url: string
  port: number
  token: string
  stop(): Promise<void>
}

const LOOPBACK_NAMES = ['localhost', '127.0.0.1', '[::1]']

/** The host name of a Host header or URL authority, lower-cased, IPv6 in brackets, without the port. */
export function hostnameOf(authority: string): string {
  const a = authority.trim().toLowerCase()
  if (a.startsWith('[')) return a.slice(0, a.indexOf(']') + 1)
  const colon = a.indexOf(':')
  return colon < 0 ? a : a.slice(0, colon)
}

const bracket = (host: string) => (host.includes(':') && !host.startsWith('[') ? `[${host}]` : host)

function refuse(status: number, message: string, headers?: Record<string, string>): Response {
  // the shape of a JSON-RPC error, as MCP clients expect from the endpoint
  return Response.json({ jsonrpc: '2.0', error: { code: -32000, message }, id: null }, { status, headers })
}

interface Session {
  transport: WebStandardStreamableHTTPServerTransport
  dispose: () => void
}

export async function serveHttp(bridge: Bridge, opts: HttpOptions): Promise<RunningHttp> {
  const log = opts.log ?? (() => {})
  const sessions = new Map<string, Session>()
  const host = bracket(opts.host.toLowerCase())
  const hosts = new Set([...LOOPBACK_NAMES, host, ...(opts.allowedHosts ?? []).map((h) => bracket(hostnameOf(h)))])
  let origins = new Set<string>()
  const token = opts.token ?? generateToken()
  // 2026-07-28: a fresh instance per request; arrivals are published on the handler's listen streams
  const modern = createMcpHandler(() => createMcpServer(bridge, { era: 'modern', arrivals: false, log }).server, {
    legacy: 'reject',
    onerror: (err: Error) => log(`MCP error: ${err.message}`),
  })
  const stopArrivals = bridge.inbox.onArrival(() => void modern.notify.resourceUpdated(INBOX_URI))

  const open = async (req: Request): Promise<Response> => {
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        sessions.set(id, session)
        log(`MCP session ${id} opened`)
      },
      onsessionclosed: (id) => {
        sessions.delete(id)
        log(`MCP session ${id} closed`)
      },
    })
    const { server, dispose } = createMcpServer(bridge, { era: 'legacy', arrivals: true, log })
    const session: Session = { transport, dispose }
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId)
      dispose()
    }
    await server.connect(transport)
    const res = await transport.handleRequest(req)
    // anything but an initialize request is refused by the transport: nothing to keep
    if (!transport.sessionId) await server.close()
    return res
  }

  const server = Bun.serve({
    hostname: opts.host,
    port: opts.port,
    // SSE streams stay open (server-to-client notifications, relay_wait); the SDK sends keep-alives
    idleTimeout: 0,
    // never Bun's development error page: it shows the source, the stack and the working directory
    development: false,
    error(err) {
      log(`internal error: ${(err as Error)?.message ?? String(err)}`)
      return refuse(500, 'Internal error')
    },
    async fetch(req) {
      const hostHeader = req.headers.get('host') ?? ''
      if (!HOST_HEADER.test(hostHeader)) return refuse(400, 'Bad request: malformed Host header')
      if (!hosts.has(hostnameOf(hostHeader))) return refuse(403, `Forbidden: Host "${hostHeader}" is not allowed (relay mcp --allowed-host NAME)`)
      const origin = req.headers.get('origin')
      if (origin !== null && !origins.has(origin.toLowerCase())) return refuse(403, `Forbidden: Origin "${origin}" is not allowed (relay mcp --allowed-origin ORIGIN)`)
      const path = new URL(req.url).pathname
      if (path !== MCP_PATH) return refuse(404, `Not found: the MCP endpoint is ${MCP_PATH}`)
      const auth = req.headers.get('authorization') ?? ''
      const given = /^Bearer +(\S+)$/i.exec(auth)?.[1]
      if (given === undefined || !tokenMatches(given, token)) {
        return refuse(401, 'Unauthorized: send Authorization: Bearer TOKEN (printed by relay mcp at start, or given with --token)', { 'www-authenticate': 'Bearer realm="relay-mcp"' })
      }
      if (req.headers.get('mcp-session-id') === null && !(await isLegacyRequest(req))) return modern.fetch(req)
      const id = req.headers.get('mcp-session-id')
      if (id !== null) {
        const session = sessions.get(id)
        if (!session) return refuse(404, 'Session not found: start a new session with initialize')
        return session.transport.handleRequest(req)
      }
      if (req.method !== 'POST') return refuse(400, 'Bad request: no Mcp-Session-Id header')
      return open(req)
    },
  })
  const port = server.port as number
  origins = new Set(
    [...[...hosts].filter((h) => LOOPBACK_NAMES.includes(h) || h === host).map((h) => `http://${h}:${port}`), ...(opts.allowedOrigins ?? [])].map((o) =>
      o.toLowerCase().replace(/\/+$/, ''),
    ),
  )
  const url = `http://${host === '0.0.0.0' || host === '[::]' ? '127.0.0.1' : host}:${port}${MCP_PATH}`
  return {
    url,
    port,
    token,
    async stop() {
      stopArrivals()
      for (const s of [...sessions.values()]) await s.transport.close().catch(() => {})
      sessions.clear()
      await modern.close().catch(() => {})
      await server.stop(true)
    },
  }
}
