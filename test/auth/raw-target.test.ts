/**
 * The signature covers the request target as the client wrote it on the request line. The runtime
 * re-encodes some characters sent raw before the relay sees the URL; the relay undoes exactly those
 * encodings (auth/canonical.ts). Proven here over a real socket with a client that writes the request
 * line byte by byte: every printable ASCII character raw in a path segment and in a query value,
 * non-ASCII UTF-8 raw, and escapes the client wrote itself.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { connect } from 'node:net'
import { signRequest, generateKeyPair } from '../../src/auth/sign.ts'
import { signedTargets } from '../../src/auth/canonical.ts'
import { startTestRelay, type TestRelay } from '../support/harness.ts'
import { signed, uniqueTimestamp } from '../support/signed.ts'

let t: TestRelay
let port = 0
const keys = generateKeyPair()

beforeAll(async () => {
  t = await startTestRelay({ rateLimits: { sendPerMin: 0, pollPerMin: 0, requestsPerMin: 0 } })
  ;({ port } = await t.relay.start())
})
afterAll(() => t.close())

/** Writes `GET <target bytes> HTTP/1.1` signed over `signedAs`; resolves with the status and body. */
function rawGet(target: Buffer, signedAs: string): Promise<{ status: number; body: string }> {
  const ts = uniqueTimestamp(t.clock.now(), keys.publicKey)
  const h = signRequest(keys, 'GET', signedAs, undefined, ts)
  const head = `HTTP/1.1\r\nHost: 127.0.0.1\r\n${Object.entries(h).map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\nConnection: close\r\n\r\n`
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(Buffer.concat([Buffer.from('GET '), target, Buffer.from(' '), Buffer.from(head)])))
    const chunks: Buffer[] = []
    socket.on('data', (d: Buffer) => chunks.push(d))
    socket.on('error', reject)
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString()
      const status = Number(text.slice(9, 12))
      resolve({ status, body: text.slice(text.indexOf('\r\n\r\n') + 4) })
    })
  })
}

const codeOf = (body: string): string | undefined => {
  try {
    return JSON.parse(body.slice(body.indexOf('{'), body.lastIndexOf('}') + 1))?.error?.code
  } catch {
    return undefined
  }
}

const PRINTABLE = Array.from({ length: 0x7e - 0x20 }, (_, i) => String.fromCharCode(0x21 + i))

describe('every printable ASCII character sent raw', () => {
  beforeAll(async () => {
    await t.handle(signed(keys, 'GET', `/v1/agents/${keys.publicKey}`, { nowMs: t.clock.now() }))
  })

  /** In a thread id: what the route answers once the signature verified. */
  const inPath: Record<string, number> = {
    '/': 404, // another path: no such route (answered before authentication)
    '\\': 404, // the runtime turns it into "/": another path, no such route
    // '?' starts a query: `b` has no value, so it is absent (200 for thread `a`)
    '%': 400, // not a valid escape: the segment does not decode
  }
  for (const c of PRINTABLE) {
    test(`in a path segment: ${JSON.stringify(c)}`, async () => {
      const target = `/v1/messages/threads/a${c}b`
      const res = await rawGet(Buffer.from(target), target)
      expect({ c, status: res.status, code: codeOf(res.body) }).toEqual({ c, status: inPath[c] ?? 200, code: inPath[c] === 404 ? 'not_found' : inPath[c] ? 'bad_request' : undefined })
    })
  }

  /** In a query value. */
  const inQuery: Record<string, number> = {
    // '&' ends the value: `b` has no value, so it is absent (200 for q=a)
    '%': 400, // not a valid escape
  }
  for (const c of PRINTABLE) {
    test(`in a query value: ${JSON.stringify(c)}`, async () => {
      const target = `/v1/discover?q=a${c}b`
      const res = await rawGet(Buffer.from(target), target)
      expect({ c, status: res.status, code: codeOf(res.body) }).toEqual({ c, status: inQuery[c] ?? 200, code: inQuery[c] ? 'bad_request' : undefined })
    })
  }
})

describe('non-ASCII and escapes', () => {
  for (const text of ['é', '日本語', '😀', 'ÿ€', "it's_é"]) {
    test(`raw UTF-8 ${JSON.stringify(text)} in the path and in the query`, async () => {
      for (const target of [`/v1/messages/threads/${text}`, `/v1/discover?q=${text}`]) {
        const res = await rawGet(Buffer.from(target), target)
        expect({ target, status: res.status }).toEqual({ target, status: 200 })
      }
    })
  }
  test('escapes the client wrote itself, upper or lower case, stay as written', async () => {
    for (const target of ['/v1/messages/threads/a%7Bb', '/v1/messages/threads/a%7bb', '/v1/discover?q=it%27s', '/v1/discover?q=%C3%A9', '/v1/discover?q=%c3%a9', '/v1/messages/threads/%E6%97%A5']) {
      const res = await rawGet(Buffer.from(target), target)
      expect({ target, status: res.status }).toEqual({ target, status: 200 })
    }
  })
  test('a signature over another target still fails', async () => {
    for (const [sent, signedAs] of [
      ["/v1/discover?q=it's", '/v1/discover?q=its'],
      ["/v1/discover?q=it's", "/v1/discover?q=it's&x"],
      ['/v1/discover?q=é', '/v1/discover?q=e'],
      ['/v1/messages/threads/a{b', '/v1/messages/threads/a%7bb'],
    ]) {
      const res = await rawGet(Buffer.from(sent), signedAs)
      expect({ sent, status: res.status, code: codeOf(res.body) }).toEqual({ sent, status: 401, code: 'invalid_signature' })
    }
  })
  test("a raw character and the runtime's own escape of it are one request: either signature verifies", async () => {
    const res = await rawGet(Buffer.from("/v1/discover?q=it's"), '/v1/discover?q=it%27s')
    expect(res.status).toBe(200)
  })
  test('what cannot be recovered: bytes that are not UTF-8 (the runtime replaces them) → 401', async () => {
    const res = await rawGet(Buffer.from([...Buffer.from('/v1/discover?q=a'), 0xff]), '/v1/discover?q=a\u00ff')
    expect(codeOf(res.body)).toBe('invalid_signature')
  })
})

test('in process too: a Request built from a URL with raw characters verifies (?q=it\'s)', async () => {
  const res = await t.handle(signed(keys, 'GET', "/v1/discover?q=it's<b>", { nowMs: t.clock.now() }))
  expect(res.status).toBe(200)
})

test('signedTargets: the received target first, then the one with the runtime encodings undone', () => {
  expect(signedTargets('/v1/x')).toEqual(['/v1/x'])
  expect(signedTargets('/a%22b?q=%27%22%3C%3E')).toEqual(['/a%22b?q=%27%22%3C%3E', `/a"b?q='"<>`])
  // %27 in the path and %5E in the query are never the runtime's own: they stay
  expect(signedTargets('/a%27b?q=%5E%C3%A9%E6%97%A5')).toEqual(['/a%27b?q=%5E%C3%A9%E6%97%A5', '/a%27b?q=%5Eé日'])
  // lower-case and broken escapes stay; a truncated UTF-8 sequence stays encoded
  expect(signedTargets('/a%7b%E6%97?q=%c3%a9%FF')).toEqual(['/a%7b%E6%97?q=%c3%a9%FF'])
})
