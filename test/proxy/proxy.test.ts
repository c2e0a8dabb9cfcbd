/**
 * deploy/nginx.conf and deploy/Caddyfile, each in front of the compiled relay on loopback (Debian's
 * nginx and caddy): the request target reaches the upstream byte for byte, signed requests with tricky
 * queries verify, a WebSocket session works, and a 100 MiB upload streams through. The configuration
 * files are used as shipped; only the parts a loopback test cannot use (TLS, host name, upstream port)
 * are swapped, each swap checked to apply exactly once. Skipped with one line per missing proxy
 * (never under CI=true).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { Subprocess } from 'bun'
import { createHash } from 'node:crypto'
import { mkdirSync, openSync, readdirSync, readFileSync, rmSync, writeSync, closeSync } from 'node:fs'
import { join } from 'node:path'
import { generateKeyPair, signRequest, signWsAuth } from '../../src/auth/sign.ts'
import { RelayClient } from '../../src/client/index.ts'
import { ROOT, buildBinary, freePort, startBinary, type RunningBinary } from '../support/binary.ts'
import { tempDir } from '../support/harness.ts'
import { requireProgram } from '../support/requires.ts'
import { rawRequest, startRecorder } from './raw-http.ts'
import { PROXIES, waitForPort } from './proxies.ts'

/** Request targets a client may send raw, which the relay must see unchanged to verify signatures. */
const TRICKY_TARGETS = [
  "/v1/discover?q=it's",
  '/v1/discover?name=a%2Fb',
  '/v1/discover?q=a+b&tag=x&tag=y',
  '/v1/discover?q=%E2%9C%93%20caf%c3%a9',
  '/v1/discover?tag=a&&tag=b&',
  '/v1/discover?q=a|b~c',
  '/v1/messages/threads/a%2Fb%20c',
  '/v1/messages/threads/%F0%9F%A6%80?limit=5',
]

const MIB = 1024 * 1024

/** RELAY_TRUST_PROXY as the shipped systemd unit sets it. */
const SHIPPED_TRUST_PROXY = /^Environment=RELAY_TRUST_PROXY=(.+)$/m.exec(readFileSync(join(ROOT, 'deploy/relay.service'), 'utf8'))?.[1] ?? ''
/** New agents per address per hour in these tests: small, to see the limit hold. */
const NEW_AGENTS_PER_HOUR = 2

let relay: RunningBinary
let work: string
beforeAll(async () => {
  work = tempDir('relay-proxy-')
  await buildBinary()
  // the unit's RELAY_TRUST_PROXY; test clients come from other loopback addresses (127.0.7.x), which
  // stand for internet clients here, so only the proxy's own 127.0.0.1 and ::1 stay exempt
  relay = await startBinary({
    cwd: work,
    dataDir: join(work, 'data'),
    env: { RELAY_TRUST_PROXY: SHIPPED_TRUST_PROXY, RELAY_RATE_ADDRESS_EXEMPT: '127.0.0.1,::1', RELAY_RATE_NEW_AGENTS_PER_HOUR: String(NEW_AGENTS_PER_HOUR) },
  })
}, 180_000)
afterAll(async () => {
  relay?.proc.kill('SIGTERM')
  await relay?.proc.exited
  rmSync(work, { recursive: true, force: true })
})

for (const kind of PROXIES) {
  const available = requireProgram(kind.name, kind.program, `the ${kind.name} proxy test`)
  describe.skipIf(!available)(`deploy: ${kind.name} in front of the relay`, () => {
    let dir: string
    let proxy: Subprocess
    let port: number
    beforeAll(async () => {
      dir = join(work, kind.name)
      mkdirSync(dir, { recursive: true })
      port = await freePort()
      proxy = await kind.start(dir, port, relay.port)
      await waitForPort(port, proxy)
    }, 30_000)
    afterAll(async () => {
      proxy?.kill('SIGTERM')
      await proxy?.exited
    })

    test('passes the request target to the upstream byte for byte', async () => {
      const recorder = await startRecorder()
      const rdir = join(dir, 'recorder')
      mkdirSync(rdir, { recursive: true })
      const rport = await freePort()
      const p = await kind.start(rdir, rport, recorder.port)
      try {
        await waitForPort(rport, p)
        for (const target of TRICKY_TARGETS) {
          const res = await rawRequest(rport, 'GET', target)
          expect([target, res.status]).toEqual([target, 200])
          expect(recorder.lines.at(-1)).toBe(`GET ${target} HTTP/1.1`)
        }
      } finally {
        p.kill('SIGTERM')
        await p.exited
        await recorder.close()
      }
    }, 60_000)

    test('signed requests with tricky queries answer through the proxy as they do directly', async () => {
      const keys = generateKeyPair()
      for (const target of TRICKY_TARGETS) {
        const direct = await rawRequest(relay.port, 'GET', target, signRequest(keys, 'GET', target, '', new Date(Date.now() - 1000).toISOString()))
        const proxied = await rawRequest(port, 'GET', target, signRequest(keys, 'GET', target, ''))
        expect([target, proxied.status, proxied.body.includes('"error"') ? JSON.parse(proxied.body).error.code : 'ok']).toEqual([
          target,
          direct.status,
          direct.body.includes('"error"') ? JSON.parse(direct.body).error.code : 'ok',
        ])
        // a raw ' is the relay's own business (the proxy passed it unchanged, see above); all others verify
        if (!target.includes("'")) expect([target, proxied.status]).toEqual([target, 200])
      }
      // and a signed POST with a body
      const body = JSON.stringify({ recipient_key: keys.publicKey, body: { text: 'via proxy ✓' } })
      const sent = await rawRequest(port, 'POST', '/v1/messages', signRequest(keys, 'POST', '/v1/messages', body), body)
      expect(sent.status).toBe(201)
    }, 60_000)

    test('a WebSocket session: auth, pushed message, ack, ping', async () => {
      const me = generateKeyPair()
      const peer = new RelayClient({ baseUrl: `http://127.0.0.1:${port}`, keys: generateKeyPair() })
      const ws = new WebSocket(`ws://127.0.0.1:${port}/v1/ws`)
      const frames: any[] = []
      const waitFor = async (type: string) => {
        const deadline = Date.now() + 15_000
        for (;;) {
          const f = frames.find((x) => x.type === type)
          if (f) return f
          if (Date.now() > deadline) throw new Error(`no ${type} frame; got ${JSON.stringify(frames)}`)
          await Bun.sleep(20)
        }
      }
      ws.onmessage = (e) => frames.push(JSON.parse(String(e.data)))
      await new Promise((r, j) => ((ws.onopen = r), (ws.onerror = j)))
      ws.send(JSON.stringify(signWsAuth(me)))
      expect((await waitFor('auth_result')).status).toBe('ok')
      const sent = await peer.send({ recipient_key: me.publicKey, body: { hello: 'through the proxy' } })
      const pushed = await waitFor('message')
      expect(pushed.message.message_id).toBe(sent.message_id)
      ws.send(JSON.stringify({ type: 'ack', message_id: sent.message_id }))
      ws.send(JSON.stringify({ type: 'ping' }))
      await waitFor('pong')
      expect((await peer.transport.json<any>('GET', `/v1/messages/${sent.message_id}/status`)).status).toBe('delivered')
      ws.close()
    }, 60_000)

    test('per-address limits hold through the proxy: the client address counts, not the proxy\'s nor a forged one', async () => {
      expect(SHIPPED_TRUST_PROXY).toBe('127.0.0.1,::1')
      const n = PROXIES.indexOf(kind)
      const fresh = (from: string, headers: Record<string, string> = {}) => {
        const keys = generateKeyPair()
        const target = `/v1/agents/${keys.publicKey}`
        return rawRequest(port, 'GET', target, { ...signRequest(keys, 'GET', target, ''), ...headers }, '', from)
      }
      const a = `127.0.7.${1 + n * 10}`
      for (let i = 0; i < NEW_AGENTS_PER_HOUR; i++) expect((await fresh(a)).status).toBe(200)
      const over = await fresh(a)
      expect(over.status).toBe(429)
      expect(JSON.parse(over.body).error.message).toMatch(/new agents from your address/)
      // a forged X-Forwarded-For changes nothing: the proxy's entry (the real client) is the last one
      expect((await fresh(a, { 'X-Forwarded-For': '203.0.113.7' })).status).toBe(429)
      expect((await fresh(a, { 'X-Forwarded-For': '203.0.113.8, 198.51.100.9' })).status).toBe(429)
      // another client address has its own count
      expect((await fresh(`127.0.7.${2 + n * 10}`)).status).toBe(200)
    }, 60_000)

    test('a 100 MiB upload streams through and downloads back intact', async () => {
      const file = join(dir, 'big.bin')
      const fd = openSync(file, 'w')
      const chunk = Buffer.alloc(MIB)
      const hash = createHash('sha256')
      for (let i = 0; i < 100; i++) {
        chunk.fill(i)
        writeSync(fd, chunk)
        hash.update(chunk)
      }
      closeSync(fd)
      const client = new RelayClient({ baseUrl: `http://127.0.0.1:${port}`, keys: generateKeyPair() })
      // nginx spools a buffered request body to its body temp directory: watch that it never does
      const spooled = new Set<string>()
      const spool = join(dir, 'body')
      const watcher = kind.name === 'nginx' ? setInterval(() => readdirSync(spool, { recursive: true }).forEach((f) => spooled.add(String(f))), 5) : undefined
      const blob = await client.uploadBlob(file, { contentType: 'application/octet-stream' }).finally(() => clearInterval(watcher))
      expect([...spooled]).toEqual([])
      expect(blob.size).toBe(100 * MIB)
      expect(blob.hash).toBe(hash.digest('hex'))
      rmSync(file)
      const res = await client.downloadBlob(blob.blob_id)
      expect(res.status).toBe(200)
      const back = createHash('sha256')
      let size = 0
      for await (const part of res.body as ReadableStream<Uint8Array>) {
        back.update(part)
        size += part.length
      }
      expect([size, back.digest('hex')]).toEqual([100 * MIB, blob.hash])
    }, 120_000)
  })
}
