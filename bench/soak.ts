/**
 * Soak: the compiled binary under steady mixed traffic from 1,000 agents for a long time, printing once a
 * minute what would show a leak or a slow drift: RSS, open file descriptors, database and WAL size,
 * requests and errors in that minute, and the p99 latency.
 *
 * Traffic: sends between random agents (some with attachments), polls by the agents that poll, blob
 * uploads, discovery queries, 100 agents on WebSockets acking what is pushed, 50 agents with a webhook to
 * a local receiver. Errors are transport failures and any 5xx or unexpected 4xx (a 429 from the per-agent
 * limits counts separately as `limited`); `ws_retry` counts sockets that closed or were refused and reconnect.
 *
 *   bun bench/soak.ts [--duration 30m]      SOAK_AGENTS=1000 SOAK_SENDS_PER_S=150
 */
import { randomBytes } from 'node:crypto'
import { readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { wsCanonicalString } from '../src/auth/canonical.ts'
import { parseDurationMs } from '../src/lib/units.ts'
import { WebhookReceiver } from '../test/support/webhook-receiver.ts'
import { ensureBinary, fmt, nativeAgent, percentile, rssMiB, startRelayBinary } from './lib.ts'

const flag = process.argv.indexOf('--duration')
const DURATION_MS = parseDurationMs(flag > 0 ? process.argv[flag + 1] : (process.env.SOAK_DURATION ?? '30m')) ?? 1_800_000
const AGENTS = Number(process.env.SOAK_AGENTS ?? 1000)
const SENDS_PER_S = Number(process.env.SOAK_SENDS_PER_S ?? 150)
const WS_AGENTS = Math.min(100, AGENTS)
const HOOK_AGENTS = Math.min(50, AGENTS - WS_AGENTS)

ensureBinary()
const rx = WebhookReceiver.start()
const relay = await startRelayBinary({ RELAY_WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', RELAY_LOG_LEVEL: 'error' })
const { url, proc, dataDir } = relay
const agents = Array.from({ length: AGENTS }, () => nativeAgent())
const socketAgents = agents.slice(0, WS_AGENTS)
const hookAgents = agents.slice(WS_AGENTS, WS_AGENTS + HOOK_AGENTS)
const pollAgents = agents.slice(WS_AGENTS + HOOK_AGENTS)

let minute = { requests: 0, errors: 0, limited: 0, latencies: [] as number[], pushed: 0, reconnects: 0, samples: new Map<string, number>() }
let lastTs = 0
/** A fresh timestamp: Ed25519 is deterministic, so two requests in one millisecond need different ones. */
const timestamp = () => new Date((lastTs = Math.max(Date.now(), lastTs + 1))).toISOString()

async function call(agent: ReturnType<typeof nativeAgent>, method: string, path: string, body?: string | Uint8Array, type = 'application/json'): Promise<{ status: number; text: string } | null> {
  const t0 = performance.now()
  const headers: Record<string, string> = agent.sign(method, path, timestamp(), body)
  if (body !== undefined) headers['content-type'] = type
  try {
    const res = await fetch(url + path, { method, headers, body })
    const text = await res.text().catch(() => '')
    minute.requests++
    minute.latencies.push(performance.now() - t0)
    if (res.status === 429) {
      minute.limited++
      const key = `429 ${method} ${path.split('?')[0].slice(0, 12)}: ${((/"message":"([^"]*)"/.exec(text) ?? [])[1] ?? '').slice(0, 48)}`
      minute.samples.set(key, (minute.samples.get(key) ?? 0) + 1)
    } else if (res.status >= 500 || (res.status >= 400 && res.status !== 404)) {
      minute.errors++
      const key = `${method} ${path.split('?')[0].replace(/\/[A-Za-z0-9_-]{20,}/g, '/:id')} ${res.status}`
      minute.samples.set(key, (minute.samples.get(key) ?? 0) + 1)
    }
    return { status: res.status, text }
  } catch {
    minute.requests++
    minute.errors++
    minute.samples.set('transport', (minute.samples.get('transport') ?? 0) + 1)
    return null
  }
}

const pick = <T>(list: T[]) => list[Math.floor(Math.random() * list.length)]

// set-up: profiles (some public with capabilities), webhooks, sockets
await Promise.all(
  agents.map((a, i) =>
    call(a, 'PATCH', `/v1/agents/${a.keys.publicKey}`, JSON.stringify({ display_name: `soak ${i}`, visibility: i % 3 === 0 ? 'public' : 'private', capabilities: [{ name: `cap-${i % 20}`, description: 'soak', tags: [`t${i % 10}`] }] })),
  ),
)
for (const a of hookAgents) await call(a, 'PUT', `/v1/agents/${a.keys.publicKey}/webhook`, JSON.stringify({ url: rx.url, secret: randomBytes(32).toString('base64url') }))
const sockets = socketAgents.map((a) => {
  let ws: WebSocket
  const connect = () => {
    ws = new WebSocket(url.replace('http', 'ws') + '/v1/ws')
    ws.onopen = () => {
      const ts = timestamp()
      ws.send(JSON.stringify({ type: 'auth', public_key: a.keys.publicKey, timestamp: ts, signature: a.signText(wsCanonicalString(ts)) }))
    }
    ws.onmessage = (e) => {
      const f = JSON.parse(String(e.data))
      if (f.type === 'message') {
        minute.pushed++
        ws.send(JSON.stringify({ type: 'ack', message_id: f.message.message_id }))
      }
    }
    ws.onclose = () => {
      if (stopping) return
      minute.reconnects++
      setTimeout(connect, 500)
    }
  }
  connect()
  return () => ws.close()
})
let stopping = false

const blobIds: { owner: (typeof agents)[number]; id: string }[] = []
const loops: Promise<void>[] = []
const every = (ms: number, step: () => Promise<unknown>) =>
  loops.push(
    (async () => {
      while (!stopping) {
        const t0 = performance.now()
        void step()
        await Bun.sleep(Math.max(0, ms - (performance.now() - t0)))
      }
    })(),
  )

every(1000 / SENDS_PER_S, async () => {
  const from = pick(agents)
  const to = pick(agents)
  const own = blobIds.filter((b) => b.owner === from)
  const attachments = own.length && Math.random() < 0.1 ? [{ blob_id: pick(own).id }] : undefined
  await call(from, 'POST', '/v1/messages', JSON.stringify({ recipient_key: to.keys.publicKey, body: { text: 'soak', n: Math.random() }, attachments }))
})
every(1000 / 40, () => call(pick(pollAgents), 'GET', '/v1/messages?limit=50'))
every(1000 / 10, () => call(pick(agents), 'GET', `/v1/discover?tag=t${Math.floor(Math.random() * 10)}&limit=20`))
every(500, async () => {
  const owner = pick(agents)
  const res = await call(owner, 'POST', '/v1/blobs', new Uint8Array(randomBytes(16 * 1024 + Math.floor(Math.random() * 48 * 1024))), 'application/octet-stream')
  if (res?.status === 201) {
    const blob_id = (JSON.parse(res.text) as { blob_id?: string }).blob_id
    if (blob_id) blobIds.push({ owner, id: blob_id })
    if (blobIds.length > 2000) blobIds.splice(0, 1000)
  }
})

const fileSize = (name: string) => {
  try {
    return statSync(join(dataDir, name)).size / 1024 / 1024
  } catch {
    return 0
  }
}
const fds = () => readdirSync(`/proc/${proc.pid}/fd`).length
console.log(`soak: ${AGENTS} agents (${WS_AGENTS} on WebSockets, ${HOOK_AGENTS} with webhooks), ${SENDS_PER_S} sends/s, for ${fmt(DURATION_MS / 60_000, 1)} min against ${url}`)
console.log('minute  requests  errors  limited  p99_ms  pushed  ws_retry  webhooks  rss_MiB  fds  db_MiB  wal_MiB')
const started = performance.now()
let hooksSeen = 0
for (let m = 1; performance.now() - started < DURATION_MS; m++) {
  await Bun.sleep(Math.min(60_000, DURATION_MS - (performance.now() - started)))
  const done = minute
  minute = { requests: 0, errors: 0, limited: 0, latencies: [], pushed: 0, reconnects: 0, samples: new Map() }
  done.latencies.sort((a, b) => a - b)
  const hooks = rx.received.length - hooksSeen
  hooksSeen = rx.received.length
  console.log(
    [m, done.requests, done.errors, done.limited, fmt(percentile(done.latencies, 99), 1), done.pushed, done.reconnects, hooks, fmt(rssMiB(proc.pid), 0), fds(), fmt(fileSize('relay.db'), 1), fmt(fileSize('relay.db-wal'), 1)]
      .map(String)
      .map((s, i) => s.padStart(i === 0 ? 6 : 8))
      .join(''),
  )
  if (done.samples.size) console.log(`        errors and 429s: ${JSON.stringify(Object.fromEntries(done.samples))}`)
}
stopping = true
await Promise.all(loops)
for (const close of sockets) close()
rx.stop()
proc.kill()
await proc.exited
