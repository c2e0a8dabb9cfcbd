/**
 * The command line on top of the client's error handling: `relay send` and `relay poll --follow` wait
 * out a 429 (unless --no-retry), and a --relay that is not a relay says so. The compiled binary runs
 * against the compiled relay; a small proxy in front of it answers 429 where the test wants one.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { spawn } from 'bun'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { BINARY, buildBinary } from '../support/binary.ts'
import { runCli } from '../support/cli.ts'
import { tempDir } from '../support/harness.ts'
import { startBinary, tempDataDir, type RunningRelay } from '../e2e/binary.ts'

let dir: string
let relay: RunningRelay
let proxy: ReturnType<typeof Bun.serve>
/** Requests (method and path) still to be refused with 429 before the proxy forwards them. */
const refuse: string[] = []
const seen: string[] = []

beforeAll(async () => {
  await buildBinary()
  dir = tempDir('relay-cli-errors-')
  relay = await startBinary(tempDataDir())
  proxy = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(req) {
      const url = new URL(req.url)
      const line = `${req.method} ${url.pathname}`
      seen.push(line)
      const i = refuse.indexOf(line)
      if (i >= 0) {
        refuse.splice(i, 1)
        const error = { code: 'rate_limit_exceeded', message: 'Rate limit exceeded', details: { limit: 1, window: '1m', retry_after: 1 }, request_id: 'req_proxy429' }
        return Response.json({ error }, { status: 429, headers: { 'retry-after': '1', 'x-request-id': 'req_proxy429' } })
      }
      const body = req.method === 'GET' || req.method === 'HEAD' ? undefined : await req.arrayBuffer()
      return fetch(relay.url + url.pathname + url.search, { method: req.method, headers: req.headers, body })
    },
  })
  for (const name of ['alice', 'bob']) {
    const r = await runCli(['keygen', '--out', `${name}.key`], { cwd: dir })
    if (r.code !== 0) throw new Error(r.stderr)
  }
})

afterAll(async () => {
  proxy?.stop(true)
  await relay?.stop()
  rmSync(dir, { recursive: true, force: true })
})

const cli = (key: string, ...args: string[]) => runCli(args, { cwd: dir, env: { RELAY_URL: `http://127.0.0.1:${proxy.port}`, RELAY_KEY_FILE: `${key}.key` } })
const keyOf = async (name: string) => (await Bun.file(join(dir, `${name}.key`)).json()).public_key as string

describe('429 on the command line', () => {
  test('relay send waits Retry-After, says so on stderr, and sends', async () => {
    const bob = await keyOf('bob')
    refuse.push('POST /v1/messages')
    seen.length = 0
    const r = await cli('alice', 'send', '--to', bob, '--text', 'after a wait', '--json')
    expect(r.stderr).toBe('rate limited; retrying in 1 s (1/3)\n')
    expect(r.code).toBe(0)
    expect(JSON.parse(r.stdout).status).toBe('sent')
    expect(seen.filter((l) => l === 'POST /v1/messages').length).toBe(2)
  })

  test('relay send --no-retry fails at once with the relay error', async () => {
    const bob = await keyOf('bob')
    refuse.push('POST /v1/messages')
    seen.length = 0
    const r = await cli('alice', 'send', '--to', bob, '--text', 'no wait', '--no-retry')
    expect(r.code).toBe(1)
    expect(r.stderr).toStartWith('relay: error: Rate limit exceeded (code rate_limit_exceeded, request req_proxy429)')
    expect(seen.filter((l) => l === 'POST /v1/messages').length).toBe(1)
  })

  test('relay poll --follow keeps following through a 429', async () => {
    const bob = await keyOf('bob')
    const sent = JSON.parse((await cli('alice', 'send', '--to', bob, '--text', 'followed', '--json')).stdout)
    refuse.push('GET /v1/messages')
    const proc = spawn([BINARY, 'poll', '--follow', '--interval', '0.2'], {
      cwd: dir,
      env: { PATH: process.env.PATH ?? '', RELAY_URL: `http://127.0.0.1:${proxy.port}`, RELAY_KEY_FILE: 'bob.key' },
      stdout: 'pipe',
      stderr: 'pipe',
    })
    let out = ''
    const reader = proc.stdout.getReader()
    const deadline = Date.now() + 15_000
    // earlier tests left messages for bob too: read until this one has been printed
    while (!out.includes(`${sent.message_id}"`) && Date.now() < deadline) {
      const { value, done } = await reader.read()
      if (done) break
      out += new TextDecoder().decode(value)
    }
    proc.kill()
    await proc.exited
    const err = await new Response(proc.stderr).text()
    expect(err).toContain('rate limited; retrying in 1 s (1/3)')
    const lines = out.trim().split('\n').map((l) => JSON.parse(l))
    expect(lines.map((m) => m.message_id)).toContain(sent.message_id)
  })
})

describe('wrong --relay', () => {
  test('a web server that is not a relay: "this is not a relay", exit 1', async () => {
    const site = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response('<html>a web site</html>', { headers: { 'content-type': 'text/html' } }) })
    try {
      const r = await runCli(['whoami', '--relay', `http://127.0.0.1:${site.port}`, '--key', 'alice.key'], { cwd: dir })
      expect(r.code).toBe(1)
      expect(r.stderr).toContain(`http://127.0.0.1:${site.port} answered HTTP 200 (text/html) without a relay request id: this is not a relay`)
      expect(r.stderr).not.toContain('undefined')
    } finally {
      site.stop(true)
    }
  })
})
