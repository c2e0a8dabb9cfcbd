/**
 * A body refused before it is read (5 MiB of JSON against the 2 MiB cap) reaches every common client as
 * the 413 envelope, every time: the answer leaves while the client is still writing, and the rest of the
 * body is read and discarded instead of the connection being reset under the client (which then sees
 * EPIPE or ECONNRESET instead of the answer), also when the client asked to close the connection.
 * Node's own http client (with `Connection: close`) and fetch run in a Node process.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { spawn } from 'bun'
import { connect } from 'node:net'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { startTestRelay, tempDir, type TestRelay } from '../support/harness.ts'
import { signed } from '../support/signed.ts'

const TRIES = 8
const BODY_BYTES = 5 * 1024 * 1024

let t: TestRelay
let port = 0
let headers: Record<string, string> = {}
const dir = tempDir('refused-body-')
const bodyFile = join(dir, 'body.json')

beforeAll(async () => {
  t = await startTestRelay()
  ;({ port } = await t.relay.start())
  // signed headers of a well-formed request (the body is refused by size before the signature matters)
  const req = signed(generateKeyPair(), 'POST', '/v1/messages', { nowMs: t.clock.now(), body: '{}' })
  headers = Object.fromEntries([...req.headers].filter(([k]) => k.startsWith('x-m2m-')))
  headers['content-type'] = 'application/json'
  writeFileSync(bodyFile, `{"body":"${'a'.repeat(BODY_BYTES)}"}`)
})
afterAll(() => t.close())

/** Runs `TRIES` requests from a Node process with `client` ('http' or 'fetch'); returns each outcome. */
async function fromNode(client: 'http' | 'fetch'): Promise<string[]> {
  const script = `
const http = require('node:http'); const fs = require('node:fs')
const body = fs.readFileSync(${JSON.stringify(bodyFile)}); const headers = ${JSON.stringify(headers)}
const url = 'http://127.0.0.1:${port}/v1/messages'
const viaHttp = () => new Promise((res) => {
  const req = http.request(url, { method: 'POST', agent: false, headers: { ...headers, connection: 'close', 'content-length': body.length } }, (r) => {
    let text = ''; r.on('data', (d) => (text += d)); r.on('end', () => res(r.statusCode + ' ' + (JSON.parse(text).error?.code)))
  })
  req.on('error', (e) => res(e.code || String(e))); req.end(body)
})
const viaFetch = () => fetch(url, { method: 'POST', headers, body }).then(async (r) => r.status + ' ' + (await r.json()).error?.code, (e) => (e.cause && e.cause.code) || String(e))
;(async () => { const out = []; for (let i = 0; i < ${TRIES}; i++) out.push(await (${client === 'http' ? 'viaHttp' : 'viaFetch'})()); console.log(JSON.stringify(out)) })()
`
  const { exitCode, stdout, stderr } = await run(['node', '-e', script])
  if (exitCode !== 0) throw new Error(stderr)
  return JSON.parse(stdout)
}

/** A child process, awaited (the relay answers from this process's event loop meanwhile). */
async function run(cmd: string[]): Promise<{ exitCode: number; stdout: string; stderr: string }> {
  const p = spawn(cmd, { stdout: 'pipe', stderr: 'pipe' })
  const [stdout, stderr, exitCode] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited])
  return { exitCode, stdout, stderr }
}

describe('a refused body reaches the client as its answer', () => {
  setDefaultTimeout(30_000)
  test("Node's http client", async () => {
    expect(await fromNode('http')).toEqual(Array(TRIES).fill('413 payload_too_large'))
  })

  test('fetch', async () => {
    expect(await fromNode('fetch')).toEqual(Array(TRIES).fill('413 payload_too_large'))
  })

  test('curl', async () => {
    const out: string[] = []
    for (let i = 0; i < TRIES; i++) {
      const args = Object.entries(headers).flatMap(([k, v]) => ['-H', `${k}: ${v}`])
      const r = await run(['curl', '-sS', '-o', '/dev/null', '-w', '%{http_code}', '--data-binary', `@${bodyFile}`, ...args, `http://127.0.0.1:${port}/v1/messages`])
      out.push(r.stdout + (r.exitCode === 0 ? '' : ` curl exit ${r.exitCode}: ${r.stderr}`))
    }
    expect(out).toEqual(Array(TRIES).fill('413'))
  })

  for (const close of [false, true]) {
    test(`the client can write the whole body after the answer arrived; the connection is not reset${close ? ' (Connection: close)' : ''}`, async () => {
      const head = `POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n${close ? 'Connection: close\r\n' : ''}${Object.entries(headers).map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\nContent-Length: ${BODY_BYTES}\r\n\r\n`
      const socket = connect(port, '127.0.0.1')
      let answer = ''
      let error: string | null = null
      let ended = false
      socket.on('data', (d) => (answer += d.toString()))
      socket.on('error', (e: NodeJS.ErrnoException) => (error = e.code ?? e.message))
      socket.on('end', () => (ended = true))
      await new Promise((r) => socket.once('connect', r))
      socket.write(head)
      const chunk = Buffer.alloc(64 * 1024, 0x61)
      let sent = 0
      let sentWhenAnswered = -1
      while (sent < BODY_BYTES && !error) {
        await new Promise<void>((r) => socket.write(chunk, () => r()))
        sent += chunk.length
        if (answer && sentWhenAnswered < 0) sentWhenAnswered = sent
        await Bun.sleep(1)
      }
      await Bun.sleep(200)
      socket.destroy()
      expect(error).toBeNull()
      expect(answer).toStartWith('HTTP/1.1 413')
      // the answer came before the body was done, and writing on was still fine
      expect(sentWhenAnswered).toBeGreaterThan(0)
      expect(sentWhenAnswered).toBeLessThan(BODY_BYTES)
      // asked to close, the relay does so once the body is read: a clean end, not a reset
      if (close) expect(ended).toBe(true)
    })
  }
})
