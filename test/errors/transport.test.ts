/** Edge cases of the HTTP transport: HEAD, odd Host headers, bodies larger than any limit. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { connect } from 'node:net'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { RelayClient } from '../../src/client/index.ts'
import { startTestRelay, type TestRelay } from '../support/harness.ts'
import { signed } from '../support/signed.ts'

let t: TestRelay
beforeAll(async () => {
  t = await startTestRelay({ rateLimits: { sendPerMin: 0, pollPerMin: 0 } })
})
afterAll(() => t.close())

/** Sends raw bytes over TCP and returns the raw answer head. */
function rawHttp(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(text))
    let out = ''
    socket.on('data', (d) => {
      out += d.toString()
      if (out.includes('\r\n\r\n')) {
        socket.destroy()
        resolve(out)
      }
    })
    socket.on('error', reject)
    setTimeout(() => {
      socket.destroy()
      resolve(out)
    }, 3000)
  })
}

describe('HEAD', () => {
  test('HEAD on a GET-only route is a wrong method (404) and has no side effect', async () => {
    const a = t.client()
    const b = t.client()
    await b.updateProfile({ inbox_policy: 'open' })
    await a.send({ recipient_key: b.publicKey, body: { n: 1 } })
    const res = await t.handle(signed(b.transport.keys, 'HEAD', '/v1/messages', { nowMs: t.clock.now() }))
    expect(res.status).toBe(404)
    const page = await b.poll()
    expect(page.messages).toHaveLength(1)
    expect(page.messages[0].status).toBe('delivered')
  })
  test('HEAD on health is 404 too', async () => {
    expect((await t.handle(new Request('http://relay.test/v1/health', { method: 'HEAD' }))).status).toBe(404)
  })
})

describe('over a real socket', () => {
  let url = ''
  let port = 0
  beforeAll(async () => {
    ;({ url, port } = await t.relay.start())
  })

  test('a one-letter Host header still reaches the routes', async () => {
    const head = await rawHttp(port, 'GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
    expect(head).toStartWith('HTTP/1.1 200')
  })

  test('a signed request with a short Host header verifies', async () => {
    const keys = generateKeyPair()
    const req = signed(keys, 'GET', `/v1/agents/${keys.publicKey}/capabilities`, { nowMs: t.clock.now() })
    const lines = [...req.headers].map(([k, v]) => `${k}: ${v}`).join('\r\n')
    const head = await rawHttp(port, `GET /v1/agents/${keys.publicKey}/capabilities HTTP/1.1\r\nHost: ab\r\n${lines}\r\nConnection: close\r\n\r\n`)
    expect(head).toStartWith('HTTP/1.1 200')
  })

  test('a declared body beyond every limit gets the error envelope, not a bare 413', async () => {
    const keys = generateKeyPair()
    const client = new RelayClient({ baseUrl: url, keys, now: () => t.clock.now() })
    const req = client.transport.buildRequest('POST', '/v1/messages', { recipient_key: keys.publicKey, body: {} })
    const lines = [...req.headers].filter(([k]) => k !== 'content-length').map(([k, v]) => `${k}: ${v}`).join('\r\n')
    const head = await rawHttp(port, `POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n${lines}\r\nContent-Length: 999999999999\r\nConnection: close\r\n\r\n{}`)
    expect(head).toStartWith('HTTP/1.1 413')
    expect(head.toLowerCase()).toContain('x-request-id: req_')
  })

  test('a blob upload declared over the blob limit gets the envelope', async () => {
    const keys = generateKeyPair()
    const client = new RelayClient({ baseUrl: url, keys, now: () => t.clock.now() })
    const req = client.transport.buildRequest('POST', '/v1/blobs', new Uint8Array(0))
    const lines = [...req.headers].filter(([k]) => k !== 'content-length').map(([k, v]) => `${k}: ${v}`).join('\r\n')
    const head = await rawHttp(port, `POST /v1/blobs HTTP/1.1\r\nHost: 127.0.0.1\r\n${lines}\r\nContent-Length: ${200 * 1024 * 1024}\r\nConnection: close\r\n\r\n`)
    expect(head).toStartWith('HTTP/1.1 413')
    expect(head.toLowerCase()).toContain('x-request-id: req_')
  })
})
