/**
 * Send → channel event latency of `relay mcp --channel` (prints figures, asserts nothing).
 *
 *   bun bench/mcp-channel.ts                 # 500 messages
 *   BENCH_QUICK=1 bun bench/mcp-channel.ts   # 100 messages
 *   BENCH_NO_BUILD=1 …                       # reuse dist/relay instead of building it
 * (from the repository root, with node_modules/.bin on PATH)
 *
 * The compiled relay (rate limits off) and the compiled bridge `relay mcp --channel` for the recipient,
 * driven over stdio by an MCP host (the 1.x SDK's client) that records each notifications/claude/channel.
 * The sender signs POST /v1/messages with the relay's own client; one message at a time, each sent after
 * the previous one's event arrived. Latency is from just before the POST to the event at the host: the
 * relay, its WebSocket push to the bridge, and the bridge's MCP notification on stdio. The first 10
 * messages warm up and are not counted. Goal: p99 ≤ 50 ms on loopback.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { encodeKeyFile, generateKeyPair } from '../src/auth/sign.ts'
import { RelayClient } from '../src/client/index.ts'
import { benchSize, ensureBinary, fmt, percentile, startRelayBinary } from './lib.ts'

const MESSAGES = benchSize('BENCH_MESSAGES', 500, 100)
const WARMUP = 10

const binary = ensureBinary()
const relay = await startRelayBinary({ RELAY_RATE_SEND_PER_MIN: '0', RELAY_RATE_REQUESTS_PER_MIN: '0' })
const dir = mkdtempSync(join(tmpdir(), 'relay-bench-mcp-'))
const alice = generateKeyPair()
const bob = generateKeyPair()
writeFileSync(join(dir, 'bob.key'), encodeKeyFile(bob), { mode: 0o600 })

const transport = new StdioClientTransport({
  command: binary,
  args: ['mcp', '--channel', '--files', dir],
  env: { PATH: process.env.PATH ?? '', RELAY_URL: relay.url, RELAY_KEY_FILE: join(dir, 'bob.key') },
  stderr: 'ignore',
})
const host = new Client({ name: 'bench-host', version: '1.0.0' })
const arrived = new Map<string, number>()
let wake: (() => void) | null = null
host.fallbackNotificationHandler = async (n) => {
  if (n.method !== 'notifications/claude/channel') return
  arrived.set((n.params as { meta: { message_id: string } }).meta.message_id, performance.now())
  wake?.()
}
await host.connect(transport)
// the bridge's socket is up once a tool answers with the connection synced
for (let i = 0; i < 100; i++) {
  const r = (await host.callTool({ name: 'relay_inbox', arguments: {} })) as { structuredContent?: { connection?: { synced?: boolean } } }
  if (r.structuredContent?.connection?.synced) break
  await Bun.sleep(50)
}

const sender = new RelayClient({ baseUrl: relay.url, keys: alice })
await sender.updateProfile({ display_name: 'bench sender' })
const latencies: number[] = []
for (let i = 0; i < MESSAGES + WARMUP; i++) {
  const event = new Promise<void>((done) => (wake = done))
  const t0 = performance.now()
  const { message_id } = await sender.send({ recipient_key: bob.publicKey, body: { text: `message ${i}` } })
  while (!arrived.has(message_id)) await Promise.race([event, Bun.sleep(1000)])
  if (i >= WARMUP) latencies.push((arrived.get(message_id) as number) - t0)
}

latencies.sort((a, b) => a - b)
console.log(`relay mcp --channel: send → notifications/claude/channel, ${MESSAGES} messages one at a time (after ${WARMUP} warm-up)`)
console.log(`  p50 ${fmt(percentile(latencies, 50))} ms   p99 ${fmt(percentile(latencies, 99))} ms   max ${fmt(latencies[latencies.length - 1])} ms   (goal p99 ≤ 50 ms)`)

await host.close()
relay.proc.kill()
await relay.proc.exited
rmSync(dir, { recursive: true, force: true })
rmSync(relay.dataDir, { recursive: true, force: true })
