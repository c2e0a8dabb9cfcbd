/**
 * The fuzzer: generated, validly signed requests against every endpoint through `relay.handle()`, and
 * generated frames on real WebSockets. Each answer is checked: never a 5xx, always X-Request-Id, every
 * error the error envelope with that request id and the status of its code, every JSON success parseable,
 * and a message body read back exactly as it was sent. Used by test/fuzz/fuzz.test.ts (bounded) and
 * bench/fuzz.ts (long runs that print counts per status).
 */
import { nativeAgent } from '../../bench/lib.ts'
import { bodyHash, canonicalString, wsCanonicalString } from '../../src/auth/canonical.ts'
import { ERROR_STATUS } from '../../src/errors.ts'
import { pathWithQuery } from '../../src/lib/url.ts'
import { uniqueTimestamp } from '../support/signed.ts'
import { BOUNDARY_NUMBERS, Rng, awkwardString, brokenJsonText, deepText, jsonStringText, jsonText, pathSegment, queryString } from './generate.ts'

const BASE = 'http://relay.fuzz'

/** An agent signing with the runtime's native Ed25519 (bench/lib.ts; fast enough for tens of thousands of requests). */
export interface FuzzAgent {
  publicKey: string
  signText(text: string): string
}

/** An agent whose key comes from the PRNG, so that a seed replays the same agents. */
export function fuzzAgent(rng: Rng): FuzzAgent {
  const { keys, signText } = nativeAgent(rng.bytes(32))
  return { publicKey: keys.publicKey, signText }
}

export interface FuzzTarget {
  handle(request: Request): Promise<Response>
  now(): number
  /** Moves a fake clock on (windows slide, messages expire); absent for a real clock. */
  advance?(ms: number): void
}

export interface Failure {
  what: string
  status: number
  problem: string
  answer: string
}

export interface FuzzReport {
  seed: number
  requests: number
  statuses: Record<number, number>
  codes: Record<string, number>
  exactChecks: number
  failures: Failure[]
}

interface Op {
  method: string
  path: string
  body?: string | Uint8Array
  headers?: Record<string, string>
  /** Sign as another agent, a tampered target, or not at all. */
  auth?: 'none' | 'bad' | 'stale'
  /** For sends: the body text that must come back exactly. */
  bodyText?: string
}

/** The pools the generators draw real ids from, so that requests also reach existing records. */
interface Pools {
  agents: FuzzAgent[]
  messages: { id: string; bodyText?: string; sender: FuzzAgent }[]
  blobs: string[]
  threads: string[]
}

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS']
const CONTENT_TYPES = ['application/json', 'text/plain', 'text/html', 'image/svg+xml', '', 'x', 'a/b; c=d', '\u00e9/\u00e9', 'application/json; charset=utf-16']

function messageDoc(rng: Rng, to: string, pools: Pools): { text: string; bodyText?: string } {
  const fields: string[] = []
  if (!rng.chance(0.03)) fields.push(`"recipient_key":${rng.chance(0.95) ? JSON.stringify(to) : jsonText(rng, 1)}`)
  let bodyText: string | undefined
  if (rng.chance(0.9)) {
    bodyText = rng.chance(0.03) ? deepText(rng) : rng.chance(0.002) ? JSON.stringify('x'.repeat(1024 * 1024)) : jsonText(rng, 1 + rng.int(5))
    fields.push(`"body":${bodyText}`)
  }
  const optional: [string, () => string][] = [
    ['thread_id', () => (rng.chance(0.5) && pools.threads.length ? JSON.stringify(rng.pick(pools.threads)) : jsonStringText(rng))],
    ['in_reply_to', () => (rng.chance(0.5) && pools.messages.length ? JSON.stringify(rng.pick(pools.messages).id) : jsonStringText(rng))],
    ['metadata', () => (rng.chance(0.8) ? '{' + `"k":${jsonText(rng, 3)}` + '}' : jsonText(rng, 2))],
    ['content_type', () => (rng.chance(0.7) ? JSON.stringify(rng.pick(CONTENT_TYPES)) : jsonStringText(rng))],
    ['expires_in', () => rng.pick(BOUNDARY_NUMBERS)],
    ['attachments', () => `[${Array.from({ length: rng.int(3) }, () => `{"blob_id":${rng.chance(0.6) && pools.blobs.length ? JSON.stringify(rng.pick(pools.blobs)) : jsonStringText(rng)}${rng.chance(0.3) ? `,"filename":${jsonStringText(rng)}` : ''}}`).join(',')}]`],
    ['unknown_field', () => jsonText(rng, 1)],
  ]
  for (const [name, value] of optional) if (rng.chance(0.25)) fields.push(`"${name}":${rng.chance(0.15) ? 'null' : value()}`)
  // white space around a value is not part of it
  return { text: '{' + fields.join(',') + '}', bodyText: bodyText?.replace(/^[ \t\n\r]+|[ \t\n\r]+$/g, '') }
}

function capabilityText(rng: Rng): string {
  if (rng.chance(0.3)) return jsonStringText(rng)
  const parts = [`"name":${rng.chance(0.8) ? JSON.stringify(`cap${rng.int(6)}`) : jsonStringText(rng)}`]
  if (rng.chance(0.5)) parts.push(`"tags":[${Array.from({ length: rng.int(4) }, () => (rng.chance(0.7) ? JSON.stringify(rng.pick(['nlp', 'Vision', 'code:review', 'x.y-z', ''])) : jsonStringText(rng))).join(',')}]`)
  if (rng.chance(0.3)) parts.push(`"description":${jsonStringText(rng)}`)
  if (rng.chance(0.2)) parts.push(`"input_schema":${rng.chance(0.8) ? `{"type":"object","max":${rng.pick(BOUNDARY_NUMBERS)}}` : jsonText(rng, 2)}`)
  if (rng.chance(0.1)) parts.push(`"version":${jsonStringText(rng)}`)
  if (rng.chance(0.05)) parts.push(`"extra":1`)
  return '{' + parts.join(',') + '}'
}

function patchDoc(rng: Rng): string {
  if (rng.chance(0.05)) return rng.chance(0.5) ? deepText(rng) : brokenJsonText(rng)
  const fields: string[] = []
  if (rng.chance(0.4)) fields.push(`"display_name":${rng.chance(0.2) ? 'null' : jsonStringText(rng)}`)
  if (rng.chance(0.3)) fields.push(`"visibility":${rng.chance(0.8) ? JSON.stringify(rng.pick(['public', 'private'])) : jsonText(rng, 1)}`)
  if (rng.chance(0.3)) fields.push(`"inbox_policy":${rng.chance(0.8) ? JSON.stringify(rng.pick(['open', 'closed', 'allowlist', 'blocklist'])) : jsonText(rng, 1)}`)
  if (rng.chance(0.3)) fields.push(`"metadata":${rng.chance(0.8) ? `{"m":${jsonText(rng, 3)}}` : jsonText(rng, 2)}`)
  if (rng.chance(0.4)) fields.push(`"capabilities":${rng.chance(0.9) ? `[${Array.from({ length: rng.int(4) }, () => capabilityText(rng)).join(',')}]` : jsonText(rng, 1)}`)
  if (rng.chance(0.05)) fields.push(`"other":${jsonText(rng, 1)}`)
  return '{' + fields.join(',') + '}'
}

/** One generated operation; the weights make sends, reads and profile changes the common case. */
function nextOp(rng: Rng, me: FuzzAgent, pools: Pools): Op {
  const other = rng.pick(pools.agents)
  const keySeg = () => pathSegment(rng, [me.publicKey, other.publicKey])
  const idSeg = () => pathSegment(rng, pools.messages.map((m) => m.id).slice(-50))
  const blobSeg = () => pathSegment(rng, pools.blobs.slice(-50))
  const threadSeg = () => (rng.chance(0.5) && pools.threads.length ? encodeURIComponent(rng.pick(pools.threads)) : pathSegment(rng, []))
  const page = (n: string) => (n === 'limit' ? rng.pick(['1', '50', '100', '0', '101', '-1', '1e2', ' 5', '']) : n === 'cursor' ? rng.pick(['', 'abc', 'MTIz', encodeURIComponent(awkwardString(rng))]) : encodeURIComponent(awkwardString(rng)))
  const r = rng.int(100)
  if (r < 22) {
    const doc = rng.chance(0.04) ? { text: brokenJsonText(rng) } : messageDoc(rng, rng.chance(0.8) ? other.publicKey : me.publicKey, pools)
    return { method: 'POST', path: '/v1/messages' + (rng.chance(0.05) ? queryString(rng, ['x'], page) : ''), body: doc.text, bodyText: doc.bodyText }
  }
  if (r < 30) return { method: 'GET', path: '/v1/messages' + queryString(rng, ['cursor', 'limit', 'status', 'sender_key', 'in_reply_to', 'thread_id'], (n) => (n === 'status' ? rng.pick(['sent', 'delivered', 'expired', 'x']) : n === 'sender_key' ? other.publicKey : page(n))) }
  if (r < 37) return { method: 'GET', path: `/v1/messages/${idSeg()}${rng.chance(0.4) ? '/status' : ''}` }
  if (r < 42) return { method: 'GET', path: `/v1/messages/threads/${threadSeg()}` + queryString(rng, ['cursor', 'limit'], page) }
  if (r < 56) {
    const k = rng.int(10)
    if (k < 4) return { method: 'PATCH', path: `/v1/agents/${rng.chance(0.8) ? 'me' : keySeg()}`, body: patchDoc(rng) }
    if (k < 7) return { method: 'GET', path: `/v1/agents/${keySeg()}${rng.chance(0.4) ? '/capabilities' : ''}` }
    if (k < 8 && rng.chance(0.2)) return { method: 'DELETE', path: `/v1/agents/${rng.chance(0.5) ? 'me' : keySeg()}` }
    return { method: 'GET', path: '/v1/agents/me' + queryString(rng, ['x'], page) }
  }
  if (r < 65) {
    if (rng.chance(0.7)) {
      return { method: 'GET', path: '/v1/discover' + queryString(rng, ['tag', 'q', 'name', 'active_since', 'limit', 'cursor'], (n) => (n === 'tag' ? rng.pick(['nlp', 'vision', 'code:review', encodeURIComponent(awkwardString(rng))]) : n === 'active_since' ? rng.pick(['2026-11-22T10:00:00Z', '0000-01-01T00:00:00Z', '9999-12-31T23:59:59.999999999%2B23:59', 'yesterday']) : page(n))) }
    }
    return { method: 'GET', path: '/v1/capabilities' + queryString(rng, ['prefix', 'limit'], (n) => (n === 'prefix' ? rng.pick(['', 'n', 'code:', '%25', '_']) : rng.pick(['1', '1000', '1001', 'x']))) }
  }
  if (r < 72) {
    const owner = rng.chance(0.85) ? 'me' : keySeg()
    const k = rng.int(4)
    if (k === 0) return { method: 'GET', path: `/v1/agents/${owner}/acl` + queryString(rng, ['entry_type'], () => rng.pick(['allow', 'block', 'x'])) }
    const method = ['GET', 'PUT', 'DELETE'][k - 1]
    const body = method === 'PUT' ? (rng.chance(0.8) ? `{"entry_type":${rng.chance(0.8) ? JSON.stringify(rng.pick(['allow', 'block'])) : jsonText(rng, 1)}}` : patchDoc(rng)) : undefined
    return { method, path: `/v1/agents/${owner}/acl/${keySeg()}`, body }
  }
  if (r < 77) {
    const method = rng.pick(['PUT', 'PUT', 'GET', 'DELETE'])
    const url = rng.pick(['https://hook.example/in', 'http://10.0.0.1/', 'http://[2001:db8::1]/', 'http://192.0.2.1/', 'ftp://x/', 'http://a.example/\r\nX: 1', 'http://a .example/', 'https://[::ffff:127.0.0.1]/', 'http://h.example/' + encodeURIComponent(awkwardString(rng))])
    const body = method === 'PUT' ? (rng.chance(0.85) ? `{"url":${JSON.stringify(url)},"secret":${JSON.stringify(rng.chance(0.8) ? Buffer.from(rng.bytes(32)).toString('base64url') : awkwardString(rng))}}` : patchDoc(rng)) : undefined
    return { method, path: `/v1/agents/${rng.chance(0.9) ? 'me' : keySeg()}/webhook`, body }
  }
  if (r < 85) {
    if (rng.chance(0.4)) {
      const ct = rng.pick(CONTENT_TYPES)
      return { method: 'POST', path: '/v1/blobs' + (rng.chance(0.1) ? queryString(rng, ['x'], page) : ''), body: rng.bytes(rng.int(3000)), headers: ct ? { 'content-type': ct } : {} }
    }
    const range = rng.chance(0.3) ? { range: rng.pick(['bytes=0-1', 'bytes=-5', 'bytes=5-', 'bytes=99999999-', 'bytes=3-1', 'bytes=0-1,3-4', 'items=0-1', 'bytes=-0', 'bytes=999999999999999999-']) } : undefined
    return { method: rng.pick(['GET', 'GET', 'HEAD', 'DELETE']), path: `/v1/blobs/${blobSeg()}`, headers: range }
  }
  if (r < 92) {
    const path = rng.pick(['/v1/health', '/v1/health/ready', '/v1/health/live', '/v1/ws', '/v1', '/', '/v1/agents', '/v1/messages/threads', `/v1/${encodeURIComponent(awkwardString(rng))}`, '/v1/blobs/', '//v1//messages', '/v1/messages/x/y/z'])
    return { method: rng.pick(METHODS), path, body: rng.chance(0.2) ? jsonText(rng, 2) : undefined }
  }
  // authentication failures: unsigned, a signature over another target, a stale timestamp
  return { method: rng.pick(['GET', 'PATCH', 'POST']), path: rng.pick(['/v1/agents/me', '/v1/messages', '/v1/discover?q=x']), body: rng.chance(0.5) ? '{}' : undefined, auth: rng.pick(['none', 'bad', 'stale'] as const) }
}

/** Builds the Request, signing the target exactly as the relay will receive it. */
function build(op: Op, agent: FuzzAgent, now: number): Request {
  const headers = new Headers(op.headers ?? {})
  if (op.body !== undefined && !headers.has('content-type')) headers.set('content-type', 'application/json')
  const hasBody = op.body !== undefined && op.method !== 'GET' && op.method !== 'HEAD'
  const request = new Request(BASE + op.path, { method: op.method, headers, body: hasBody ? (op.body as string | Uint8Array<ArrayBuffer>) : undefined })
  if (op.auth === 'none') return request
  const ts = uniqueTimestamp(op.auth === 'stale' ? now - 3_600_000 : now, agent.publicKey)
  const target = pathWithQuery(request.url) + (op.auth === 'bad' ? '&tampered' : '')
  request.headers.set('x-m2m-public-key', agent.publicKey)
  request.headers.set('x-m2m-timestamp', ts)
  request.headers.set('x-m2m-signature', agent.signText(canonicalString(op.method, target, ts, bodyHash(hasBody ? op.body : undefined))))
  return request
}

function errorCodeOf(text: string): string {
  try {
    return JSON.parse(text)?.error?.code ?? '?'
  } catch {
    return '?'
  }
}

/** What is wrong with an answer, or null. `raw`: a blob download, whose body is the blob's bytes. */
export function problemWith(method: string, status: number, headers: Headers, text: string, raw = false): string | null {
  if (status >= 500) return `status ${status}`
  const rid = headers.get('x-request-id')
  // over a socket, the runtime refuses a request line and headers over 16 KiB itself, with a bare
  // 431 and a closed connection, before the relay sees the request (documented in the README)
  if (status === 431 && rid === null && text === '') return null
  if (!rid || !/^req_[0-9a-f]{16}$/.test(rid)) return `missing or malformed X-Request-Id: ${rid}`
  // in process a HEAD answer still holds the GET body; the server drops it on the wire
  if (method === 'HEAD') return null
  if (status >= 400) {
    let body: any
    try {
      body = JSON.parse(text)
    } catch {
      return 'an error that is not JSON'
    }
    const e = body?.error
    if (!e || Object.keys(body).length !== 1) return 'not the error envelope'
    if (typeof e.code !== 'string' || typeof e.message !== 'string' || !('details' in e)) return 'envelope lacks code, message or details'
    if (e.request_id !== rid) return `request_id ${e.request_id} is not the header's ${rid}`
    if ((ERROR_STATUS as Record<string, number>)[e.code] !== status) return `code ${e.code} answered with status ${status}`
    if (/\bat \S+ \(|sqlite|SQL/i.test(e.message)) return 'an internal detail in the message'
    return null
  }
  if (!raw && (headers.get('content-type') ?? '').includes('json') && status !== 204) {
    try {
      JSON.parse(text)
    } catch {
      return 'a JSON answer that does not parse'
    }
  }
  return null
}

/**
 * Runs `total` generated HTTP requests in batches of `concurrency`, checking every answer, then reads
 * back a sample of accepted messages and compares their bodies with the text sent.
 */
export async function fuzzHttp(target: FuzzTarget, opts: { seed: number; total: number; agents?: number; concurrency?: number; onProgress?: (done: number) => void }): Promise<FuzzReport> {
  const rng = new Rng(opts.seed)
  const pools: Pools = { agents: Array.from({ length: opts.agents ?? 24 }, () => fuzzAgent(rng)), messages: [], blobs: [], threads: [] }
  const report: FuzzReport = { seed: opts.seed, requests: 0, statuses: {}, codes: {}, exactChecks: 0, failures: [] }
  const concurrency = opts.concurrency ?? 8
  const record = (what: string, status: number, problem: string | null, answer: string) => {
    report.statuses[status] = (report.statuses[status] ?? 0) + 1
    if (problem && report.failures.length < 50) report.failures.push({ what, status, problem, answer: answer.slice(0, 300) })
  }

  for (let done = 0; done < opts.total; ) {
    const batch = Array.from({ length: Math.min(concurrency, opts.total - done) }, () => {
      const agent = rng.pick(pools.agents)
      return { agent, op: nextOp(rng, agent, pools) }
    })
    done += batch.length
    await Promise.all(
      batch.map(async ({ agent, op }) => {
        const what = `${op.method} ${op.path.slice(0, 200)}${typeof op.body === 'string' ? ` ${op.body.slice(0, 200)}` : ''}`
        let res: Response
        let text: string
        try {
          res = await target.handle(build(op, agent, target.now()))
          text = await res.text()
        } catch (err) {
          record(what, 0, `the request failed: ${String(err)}`, '')
          return
        }
        report.requests++
        const blobBytes = op.path.startsWith('/v1/blobs/') && res.status < 300
        record(what, res.status, problemWith(op.method, res.status, res.headers, text, blobBytes), text)
        if (res.status >= 400 && op.method !== 'HEAD') {
          const code = errorCodeOf(text)
          report.codes[code] = (report.codes[code] ?? 0) + 1
        }
        if (res.status === 201 && op.path.startsWith('/v1/messages')) {
          pools.messages.push({ id: JSON.parse(text).message_id, bodyText: op.bodyText, sender: agent })
          const thread = /"thread_id":("(?:[^"\\]|\\.)*")/.exec(typeof op.body === 'string' ? op.body : '')
          if (thread) pools.threads.push(JSON.parse(thread[1]))
        }
        if ((res.status === 201 || res.status === 200) && op.path.startsWith('/v1/blobs') && op.method === 'POST') pools.blobs.push(JSON.parse(text).blob_id)
      }),
    )
    if (target.advance && rng.chance(0.2)) target.advance(rng.int(5000))
    opts.onProgress?.(done)
  }

  // exactness: the sender reads a sample of its accepted messages back (they may have expired: 404 is fine)
  // (a JSON null body is no body: it reads back without one, which the check below covers separately)
  const sample = pools.messages.filter((m) => m.bodyText !== undefined).slice(-300)
  for (const m of sample) {
    const res = await target.handle(build({ method: 'GET', path: `/v1/messages/${m.id}` }, m.sender, target.now()))
    const text = await res.text()
    report.requests++
    record(`read back ${m.id}`, res.status, problemWith('GET', res.status, res.headers, text), text)
    if (res.status !== 200) continue
    const msg = JSON.parse(text)
    if (msg.status === 'expired') continue
    report.exactChecks++
    if (m.bodyText === 'null') {
      if (text.includes('"body":')) record(`read back ${m.id}`, res.status, 'a null body came back as a body', text)
    } else if (!text.includes(`"body":${m.bodyText}`)) record(`read back ${m.id}`, res.status, `body not as sent: ${m.bodyText?.slice(0, 100)}`, text)
  }
  return report
}

export interface WsReport {
  frames: number
  replies: Record<string, number>
  failures: string[]
}

/**
 * Opens `sockets` authenticated WebSockets and sends `total` generated frames over them; every frame the
 * relay sends must parse, none may be an internal error, and every socket must still answer a ping.
 * A few fresh sockets get a generated first frame instead of a valid auth frame: they must be answered
 * with an auth_result and closed with 4001, never dropped.
 */
export async function fuzzWs(wsUrl: string, now: () => number, opts: { seed: number; total: number; sockets?: number }): Promise<WsReport> {
  const rng = new Rng(opts.seed ^ 0x5a5a5a5a)
  const report: WsReport = { frames: 0, replies: {}, failures: [] }
  const agents = Array.from({ length: opts.sockets ?? 6 }, () => fuzzAgent(rng))
  const open = (agent: FuzzAgent, first?: string) =>
    new Promise<{ ws: WebSocket; texts: string[]; closed: { code: number } | null }>((resolve, reject) => {
      const ws = new WebSocket(wsUrl)
      const s = { ws, texts: [] as string[], closed: null as { code: number } | null }
      ws.onmessage = (e) => s.texts.push(String(e.data))
      ws.onclose = (e) => (s.closed = { code: e.code })
      ws.onerror = () => reject(new Error('cannot connect'))
      ws.onopen = () => {
        const ts = uniqueTimestamp(now(), agent.publicKey)
        ws.send(first ?? JSON.stringify({ type: 'auth', public_key: agent.publicKey, timestamp: ts, signature: agent.signText(wsCanonicalString(ts)) }))
        resolve(s)
      }
    })
  const until = async (check: () => boolean, ms = 5000) => {
    const end = Date.now() + ms
    while (!check()) {
      if (Date.now() > end) return false
      await Bun.sleep(5)
    }
    return true
  }

  // one after another, as agents connect: handshakes at once would meet the relay's pre-auth budget
  const sockets: Awaited<ReturnType<typeof open>>[] = []
  for (const [i, a] of agents.entries()) {
    const s = await open(a)
    sockets.push(s)
    if (!(await until(() => s.texts.some((t) => t.includes('"auth_result"'))))) report.failures.push(`socket ${i}: no auth_result`)
  }
  const frame = (): string | Uint8Array => {
    const r = rng.int(100)
    const to = rng.pick(agents).publicKey
    if (r < 35) return `{"type":"send","id":${jsonText(rng, 1)},"message":${messageDoc(rng, to, { agents, messages: [], blobs: [], threads: [] }).text}}`
    if (r < 50) return `{"type":"ack","message_id":${rng.chance(0.3) ? jsonText(rng, 1) : JSON.stringify(`msg_1_${'0'.repeat(12)}`)}}`
    if (r < 60) return '{"type":"ping"}'
    if (r < 70) return rng.chance(0.5) ? brokenJsonText(rng) : deepText(rng)
    if (r < 75) return rng.bytes(rng.int(64))
    if (r < 85) return jsonText(rng, 3)
    return `{"type":${jsonStringText(rng)},"x":${jsonText(rng, 2)}}`
  }
  for (let i = 0; i < opts.total; i++) {
    const s = rng.pick(sockets)
    if (s.closed) continue
    s.ws.send(frame())
    report.frames++
    if (i % 50 === 49) await Bun.sleep(1)
  }
  // every socket still answers; every frame it got is JSON and none is an internal error
  for (const [i, s] of sockets.entries()) {
    const before = s.texts.length
    s.ws.send('{"type":"ping"}')
    if (!(await until(() => s.texts.slice(before).some((t) => t === '{"type":"pong"}') || s.closed !== null, 10_000))) report.failures.push(`socket ${i}: no pong after the frames`)
    if (s.closed) report.failures.push(`socket ${i} closed with ${s.closed.code}`)
    for (const t of s.texts) {
      let f: any
      try {
        f = JSON.parse(t)
      } catch {
        report.failures.push(`socket ${i}: a frame that is not JSON: ${t.slice(0, 200)}`)
        continue
      }
      const key = `${f.type}${f.error ? ':' + f.error.code : ''}`
      report.replies[key] = (report.replies[key] ?? 0) + 1
      if (f.error?.code === 'internal_error') report.failures.push(`socket ${i}: internal_error for a frame`)
    }
    s.ws.close()
  }
  // first frames that are not valid auth frames: answered and closed with 4001, never dropped
  for (let i = 0; i < 20; i++) {
    const text = rng.chance(0.5) ? `{"type":"auth","public_key":${jsonStringText(rng)},"timestamp":${jsonStringText(rng)},"signature":${jsonStringText(rng)}}` : String(frame())
    const s = await open(fuzzAgent(rng), text)
    if (!(await until(() => s.closed !== null))) report.failures.push(`auth fuzz ${i}: not closed`)
    else if (s.closed?.code !== 4001 || !s.texts.some((t) => t.includes('"auth_result"'))) report.failures.push(`auth fuzz ${i}: closed with ${s.closed?.code}, frames ${s.texts.join(' ').slice(0, 200)}`)
  }
  return report
}
