/**
 * deploy/nginx.conf and deploy/Caddyfile, each in front of the compiled relay on loopback (Debian's
 * nginx and caddy): the request target reaches the upstream byte for byte, signed requests with tricky
 * queries verify, a WebSocket session works, and a 100 MiB upload streams through. The configuration
 * files are used as shipped; only the parts a loopback test cannot use (TLS, host name, upstream port)
 * are swapped, each swap checked to apply exactly once. Skipped with one line per missing proxy
 * (never under CI=true).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { spawn, type Subprocess } from 'bun'
import { createHash } from 'node:crypto'
import { chmodSync, mkdirSync, openSync, readFileSync, readdirSync, rmSync, writeSync, closeSync, writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { join } from 'node:path'
import { generateKeyPair, signRequest, signWsAuth } from '../../src/auth/sign.ts'
import { RelayClient } from '../../src/client/index.ts'
import { ROOT, buildBinary, freePort, startBinary, type RunningBinary } from '../support/binary.ts'
import { tempDir } from '../support/harness.ts'
import { requireProgram } from '../support/requires.ts'
import { rawRequest, startRecorder } from './raw-http.ts'

/** Replaces `from` (string or pattern) in `text`, insisting that it occurs exactly once. */
function swapOnce(text: string, from: string | RegExp, to: string): string {
  const count = typeof from === 'string' ? text.split(from).length - 1 : (text.match(new RegExp(from.source, from.flags + 'g')) ?? []).length
  if (count !== 1) throw new Error(`expected exactly one ${from} in the shipped configuration, found ${count}`)
  return text.replace(from, to)
}

interface ProxyKind {
  name: string
  program: string | null
  /** Starts the shipped configuration on 127.0.0.1:listen in front of 127.0.0.1:upstream. */
  start(dir: string, listen: number, upstream: number): Promise<Subprocess>
}

const PROXIES: ProxyKind[] = [
  {
    name: 'nginx',
    program: Bun.which('nginx') ?? Bun.which('nginx', { PATH: '/usr/sbin:/sbin' }),
    async start(dir, listen, upstream) {
      let site = readFileSync(join(ROOT, 'deploy/nginx.conf'), 'utf8')
      site = swapOnce(site, 'server 127.0.0.1:8080;', `server 127.0.0.1:${upstream};`)
      site = swapOnce(site, /server \{\n {4}listen 80;[\s\S]*?\n\}\n/, '') // the http → https redirect
      site = swapOnce(site, 'listen 443 ssl http2;', `listen 127.0.0.1:${listen};`)
      site = swapOnce(site, /\n {4}listen \[::\]:443 ssl http2;/, '')
      site = swapOnce(site, /\n {4}ssl_certificate .*;\n {4}ssl_certificate_key .*;/, '')
      for (const d of ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) {
        mkdirSync(join(dir, d), { recursive: true })
        chmodSync(join(dir, d), 0o777) // workers run as an unprivileged user
      }
      chmodSync(dir, 0o755)
      writeFileSync(join(dir, 'relay.conf'), site)
      writeFileSync(
        join(dir, 'nginx.conf'),
        `worker_processes 1;\npid ${dir}/nginx.pid;\nerror_log ${dir}/error.log warn;\nevents { worker_connections 256; }\n` +
          `http {\n  access_log off;\n  client_body_temp_path ${dir}/body;\n  proxy_temp_path ${dir}/proxy;\n  fastcgi_temp_path ${dir}/fastcgi;\n` +
          `  uwsgi_temp_path ${dir}/uwsgi;\n  scgi_temp_path ${dir}/scgi;\n  include ${dir}/relay.conf;\n}\n`,
      )
      return spawn([this.program as string, '-p', dir, '-c', join(dir, 'nginx.conf'), '-e', join(dir, 'error.log'), '-g', 'daemon off;'], { stdout: 'ignore', stderr: 'pipe' })
    },
  },
  {
    name: 'caddy',
    program: Bun.which('caddy'),
    async start(dir, listen, upstream) {
      let file = readFileSync(join(ROOT, 'deploy/Caddyfile'), 'utf8')
      file = swapOnce(file, 'reverse_proxy 127.0.0.1:8080', `reverse_proxy 127.0.0.1:${upstream}`)
      file = swapOnce(file, /^relay\.example\.org \{/m, `http://127.0.0.1:${listen} {`)
      // global options for a test instance: no admin endpoint, no certificates
      file = `{\n\tadmin off\n\tauto_https off\n}\n\n${file}`
      writeFileSync(join(dir, 'Caddyfile'), file)
      const env = { PATH: process.env.PATH ?? '', HOME: dir, XDG_DATA_HOME: dir, XDG_CONFIG_HOME: dir }
      return spawn([this.program as string, 'run', '--config', join(dir, 'Caddyfile'), '--adapter', 'caddyfile'], { env, stdout: 'ignore', stderr: 'pipe' })
    },
  },
]

async function waitForPort(port: number, proc: Subprocess): Promise<void> {
  const deadline = Date.now() + 20_000
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`proxy exited with ${proc.exitCode}: ${await new Response(proc.stderr as ReadableStream).text()}`)
    const up = await new Promise<boolean>((r) => {
      const s = connect(port, '127.0.0.1', () => (s.end(), r(true)))
      s.on('error', () => r(false))
    })
    if (up) return
    if (Date.now() > deadline) throw new Error(`proxy not listening on ${port}`)
    await Bun.sleep(50)
  }
}

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

let relay: RunningBinary
let work: string
beforeAll(async () => {
  work = tempDir('relay-proxy-')
  await buildBinary()
  relay = await startBinary({ cwd: work, dataDir: join(work, 'data') })
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
