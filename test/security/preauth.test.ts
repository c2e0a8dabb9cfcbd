/**
 * What a client costs before it is authenticated, over real sockets: signature headers and the timestamp
 * window are checked before a body byte is read, unauthenticated bodies are held against a global and a
 * per-address budget, a slow body gets 408, the per-address request rate applies before any signature,
 * refused bodies still get their answer, and requests the runtime rejects itself get what it answers.
 */
import { afterEach, describe, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { generateKeyPair, signRequest } from '../../src/auth/sign.ts'
import type { ConfigOverrides } from '../../src/config/config.ts'
import { addressKey, clientAddress, parseAddressList } from '../../src/lib/address-key.ts'
import { startTestRelay, type TestRelay } from '../support/harness.ts'
import { until } from '../support/ws.ts'
import { RawConnection, head } from './raw-http.ts'

const MiB = 1024 * 1024
let open: TestRelay[] = []
let conns: RawConnection[] = []
afterEach(async () => {
  for (const c of conns) c.destroy()
  conns = []
  for (const t of open) await t.close()
  open = []
})

async function listening(overrides: ConfigOverrides = {}) {
  // the loopback addresses these tests come from are exempt from per-address limits by default
  const t = await startTestRelay({ host: '127.0.0.1', ...overrides, rateLimits: { addressExempt: '', ...overrides.rateLimits } })
  open.push(t)
  const { port } = await t.relay.start()
  return { t, port }
}

async function connection(port: number, localAddress?: string) {
  const c = await RawConnection.open(port, localAddress)
  conns.push(c)
  return c
}

const forged = (t: TestRelay) => ({
  'X-M2M-Public-Key': randomBytes(32).toString('base64url'),
  'X-M2M-Timestamp': new Date(t.clock.now()).toISOString(),
  'X-M2M-Signature': randomBytes(64).toString('base64url'),
})

function expectEnvelope(a: { status: number; headers: Record<string, string>; json: any }, status: number, code: string) {
  expect(a.status).toBe(status)
  expect(a.json?.error?.code).toBe(code)
  expect(a.json.error.request_id).toMatch(/^req_/)
  expect(a.headers['x-request-id']).toBe(a.json.error.request_id)
}

describe('answered before the body is read', () => {
  test('no signature headers: 401 while a 2 MiB body is still arriving, nothing held', async () => {
    const { t, port } = await listening()
    const c = await connection(port)
    await c.write(head('POST', '/v1/messages', { 'Content-Type': 'application/json', 'Content-Length': 2 * MiB }))
    await c.writeFiller(MiB)
    expectEnvelope(await c.answer(), 401, 'unauthorized')
    expect(t.relay.preauth.heldBytes).toBe(0)
    // the rest of the body is discarded as it arrives and the connection serves the next request
    await c.writeFiller(MiB)
    await c.write(head('GET', '/v1/health'))
    expect((await c.answer()).status).toBe(200)
  })

  test('a timestamp outside the window and a malformed key are refused at once', async () => {
    const { t, port } = await listening()
    const stale = { ...forged(t), 'X-M2M-Timestamp': new Date(t.clock.now() - 3_600_000).toISOString() }
    const c = await connection(port)
    await c.write(head('PATCH', `/v1/agents/${generateKeyPair().publicKey}`, { ...stale, 'Content-Type': 'application/json', 'Content-Length': MiB }))
    expectEnvelope(await c.answer(), 401, 'timestamp_expired')
    const d = await connection(port)
    await d.write(head('POST', '/v1/messages', { ...forged(t), 'X-M2M-Public-Key': 'short', 'Content-Type': 'application/json', 'Content-Length': MiB }))
    expectEnvelope(await d.answer(), 401, 'unauthorized')
    expect(t.relay.preauth.heldBytes).toBe(0)
  })

  test('a 5 MiB PATCH gets its 413 while it is still being sent, with Content-Length and chunked', async () => {
    const { t, port } = await listening()
    const keys = generateKeyPair()
    const path = `/v1/agents/${keys.publicKey}`
    const declared = await connection(port)
    const ts = new Date(t.clock.now()).toISOString()
    await declared.write(head('PATCH', path, { ...signRequest(keys, 'PATCH', path, '', ts), 'Content-Type': 'application/json', 'Content-Length': 5 * MiB }))
    const writing = declared.writeFiller(5 * MiB)
    expectEnvelope(await declared.answer(), 413, 'payload_too_large')
    expect(await writing).toBe(5 * MiB)
    expect(declared.error).toBeNull()

    const chunked = await connection(port)
    await chunked.write(head('PATCH', path, { ...signRequest(keys, 'PATCH', path, '', new Date(t.clock.now() + 1).toISOString()), 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' }))
    const block = Buffer.alloc(64 * 1024, 0x20)
    const frame = Buffer.concat([Buffer.from(`${block.length.toString(16)}\r\n`), block, Buffer.from('\r\n')])
    let answer: Awaited<ReturnType<RawConnection['answer']>> | undefined
    const got = chunked.answer().then((a) => (answer = a))
    for (let sent = 0; sent < 5 * MiB && !chunked.closed; sent += block.length) await chunked.write(frame)
    await chunked.write('0\r\n\r\n')
    await got
    expectEnvelope(answer!, 413, 'payload_too_large')
    expect(chunked.error).toBeNull()
    await chunked.write(head('GET', '/v1/health'))
    expect((await chunked.answer()).status).toBe(200)
  })
})

describe('unauthenticated bodies are held against budgets', () => {
  test('bodies hold what they sent, not what they declare; per address 429, over all clients 503, both with Retry-After', async () => {
    // strangers may hold 6 MiB of the 8 (the rest is the known keys' reserve), an address at most 3 MiB
    const { t, port } = await listening({ preauth: { memoryBytes: 8 * MiB, memoryPerAddressBytes: 3 * MiB } })
    const body = (c: RawConnection, bytes: number, sent = bytes - 1, headers: Record<string, string> = forged(t)) =>
      c.write(head('POST', '/v1/messages', { ...headers, 'Content-Type': 'application/json', 'Content-Length': bytes })).then(() => c.writeFiller(sent))
    // declaring 2 MiB and sending 1 KiB holds 1 KiB
    const trickle = await connection(port, '127.0.0.9')
    await body(trickle, 2 * MiB, 1024)
    await until(() => t.relay.preauth.heldBytes === 1024, 3000, 'the bytes sent held')
    trickle.destroy()
    await until(() => t.relay.preauth.heldBytes === 0, 3000, 'trickle released')

    const a1 = await connection(port, '127.0.0.1')
    const a2 = await connection(port, '127.0.0.1')
    await body(a1, 1.5 * MiB)
    await body(a2, 1.5 * MiB)
    await until(() => t.relay.preauth.heldBytes === 3 * MiB - 2, 3000, 'two bodies held')
    const a3 = await connection(port, '127.0.0.1')
    await body(a3, MiB)
    const perAddress = await a3.answer()
    expectEnvelope(perAddress, 429, 'rate_limit_exceeded')
    expect(Number(perAddress.headers['retry-after'])).toBeGreaterThan(0)

    const b1 = await connection(port, '127.0.0.2')
    await body(b1, 1.5 * MiB)
    await until(() => t.relay.preauth.heldBytes === 4.5 * MiB - 3, 3000, 'third body held')
    expect((await t.client().health('/details')).components.preauth).toEqual({ status: 'ok', held_bytes: 4.5 * MiB - 3, limit_bytes: 8 * MiB })
    // a third address: within its fair share (2 MiB of the 6 among three), past the strangers' part
    const c1 = await connection(port, '127.0.0.3')
    await body(c1, Math.floor(1.9 * MiB))
    const global = await c1.answer()
    expectEnvelope(global, 503, 'service_unavailable')
    expect(Number(global.headers['retry-after'])).toBeGreaterThan(0)
    await until(() => t.relay.preauth.heldBytes === 4.5 * MiB - 3, 3000, 'the refused body released')

    // a request naming a key that has an agent record may use the reserve
    const keys = generateKeyPair()
    await t.client(keys).getCapabilities()
    const known = await connection(port, '127.0.0.3')
    await body(known, Math.floor(1.9 * MiB), undefined, { ...forged(t), 'X-M2M-Public-Key': keys.publicKey })
    await until(() => t.relay.preauth.heldBytes > 6 * MiB, 3000, 'a known key held in the reserve')

    for (const c of [a1, a2, b1, known]) c.destroy()
    await until(() => t.relay.preauth.heldBytes === 0, 3000, 'budget released')
  })

  test('a body that arrives slower than the minimum rate is cut with 408 and releases what it held', async () => {
    const { t, port } = await listening()
    const c = await connection(port, '127.0.0.5')
    await c.write(head('POST', '/v1/messages', { ...forged(t), 'Content-Type': 'application/json', 'Content-Length': 2 * MiB }))
    await c.writeFiller(4096)
    await until(() => t.relay.preauth.heldBytes === 4096, 3000, 'the first bytes held')
    // then a byte now and then: far under the minimum rate once the grace is over
    const started = performance.now()
    let answer: Awaited<ReturnType<RawConnection['answer']>> | undefined
    const got = c.answer().then((a) => (answer = a))
    while (!answer && performance.now() - started < 8000) {
      await c.writeFiller(1)
      await Bun.sleep(200)
    }
    await got
    expectEnvelope(answer!, 408, 'request_timeout')
    expect(performance.now() - started).toBeLessThan(8000)
    await until(() => t.relay.preauth.heldBytes === 0, 3000, 'released')
  }, 15_000)

  test('held bodies that complete are released whatever the answer', async () => {
    const { t, port } = await listening({ preauth: { memoryBytes: 3 * MiB } })
    for (let i = 0; i < 4; i++) {
      const c = await connection(port)
      await c.write(head('POST', '/v1/messages', { ...forged(t), 'Content-Type': 'application/json', 'Content-Length': 2 * MiB }))
      await c.writeFiller(2 * MiB)
      expectEnvelope(await c.answer(), 401, 'invalid_signature')
    }
    expect(t.relay.preauth.heldBytes).toBe(0)
  })

  test('in process (no client address) the global budget applies to chunked bodies as they arrive', async () => {
    const { t } = await listening({ preauth: { memoryBytes: 256 * 1024 } })
    const chunks = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < 8; i++) controller.enqueue(new Uint8Array(64 * 1024).fill(0x20))
        controller.close()
      },
    })
    const res = await t.handle(new Request('http://relay.test/v1/messages', { method: 'POST', body: chunks, headers: { ...forged(t), 'content-type': 'application/json' } }))
    expect(res.status).toBe(503)
    expect(((await res.json()) as any).error.code).toBe('service_unavailable')
    expect(t.relay.preauth.heldBytes).toBe(0)
  })

  test('a body slower than the body deadline gets 408 and releases what it held', async () => {
    const { t, port } = await listening({ preauth: { bodyTimeoutMs: 300 } })
    const c = await connection(port)
    await c.write(head('POST', '/v1/messages', { ...forged(t), 'Content-Type': 'application/json', 'Content-Length': 1000 }))
    await c.write('{"recipient_key":')
    expectEnvelope(await c.answer(), 408, 'request_timeout')
    expect(t.relay.preauth.heldBytes).toBe(0)
  })
})

describe('per-address request rate, before any signature', () => {
  test('over the rate: 429 with Retry-After even for garbage signatures; refills with time; in-process callers are not counted', async () => {
    const { t, port } = await listening({ rateLimits: { addressPerMin: 3 } })
    const path = `/v1/agents/${generateKeyPair().publicKey}`
    const statuses: number[] = []
    for (let i = 0; i < 4; i++) {
      const c = await connection(port, '127.0.0.5')
      await c.write(head('GET', path, forged(t)))
      statuses.push((await c.answer()).status)
    }
    expect(statuses).toEqual([401, 401, 401, 429])
    const c = await connection(port, '127.0.0.5')
    await c.write(head('GET', path, forged(t)))
    const limited = await c.answer()
    expectEnvelope(limited, 429, 'rate_limit_exceeded')
    expect(limited.json.error.details).toMatchObject({ limit: 3, window: '1m' })
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1)
    // another address has its own bucket; health is never counted
    const other = await connection(port, '127.0.0.6')
    await other.write(head('GET', path, forged(t)))
    expect((await other.answer()).status).toBe(401)
    await c.write(head('GET', '/v1/health'))
    expect((await c.answer()).status).toBe(200)
    // 20 s later one request's worth has refilled
    t.clock.advance(20_000)
    const later = await connection(port, '127.0.0.5')
    await later.write(head('GET', path, forged(t)))
    expect((await later.answer()).status).toBe(401)
    // the in-process harness has no address: never limited
    const me = t.client()
    for (let i = 0; i < 5; i++) expect((await me.getAgent()).public_key).toBe(me.publicKey)
  })

  test('behind a trusted proxy the last X-Forwarded-For entry is the address', async () => {
    const { t, port } = await listening({ rateLimits: { addressPerMin: 1 }, trustProxy: '127.0.0.1' })
    const path = `/v1/agents/${generateKeyPair().publicKey}`
    const ask = async (xff: string) => {
      const c = await connection(port)
      await c.write(head('GET', path, { ...forged(t), 'X-Forwarded-For': xff }))
      return (await c.answer()).status
    }
    expect(await ask('203.0.113.9, 198.51.100.1')).toBe(401)
    // the client-supplied first entry changes nothing: same proxy-appended address
    expect(await ask('192.0.2.77, 198.51.100.1')).toBe(429)
    expect(await ask('198.51.100.2')).toBe(401)
  })

  test('behind a proxy that is not trusted, X-Forwarded-For is ignored', async () => {
    // the trusted proxy is another machine: a client reaching the relay directly picks nothing
    const { t, port } = await listening({ rateLimits: { addressPerMin: 1 }, trustProxy: '192.0.2.10' })
    const path = `/v1/agents/${generateKeyPair().publicKey}`
    const ask = async (xff: string) => {
      const c = await connection(port, '127.0.0.7')
      await c.write(head('GET', path, { ...forged(t), 'X-Forwarded-For': xff }))
      return (await c.answer()).status
    }
    expect(await ask('198.51.100.1')).toBe(401)
    expect(await ask('198.51.100.2')).toBe(429)
  })

  test('address keys: IPv4 as is, IPv4-mapped IPv6 as IPv4, IPv6 by /56 (every /64 inside it is one key)', () => {
    expect(addressKey('192.0.2.1')).toBe('192.0.2.1')
    expect(addressKey('::ffff:192.0.2.1')).toBe('192.0.2.1')
    expect(addressKey('2001:db8:1:2:3:4:5:6')).toBe('2001:db8:1:0::/56')
    expect(addressKey('2001:db8:1:2::9')).toBe(addressKey('2001:db8:1:2:ffff::1'))
    // 100 /64s of one /56 (the fourth group's low byte) are one key; the next /56 is another
    const keys = new Set(Array.from({ length: 100 }, (_, i) => addressKey(`2001:db8:1:${(0x3400 + i).toString(16)}::1`)))
    expect([...keys]).toEqual(['2001:db8:1:3400::/56'])
    expect(addressKey('2001:db8:1:3500::1')).toBe('2001:db8:1:3500::/56')
    expect(addressKey('2001:db8::1')).toBe('2001:db8:0:0::/56')
    expect(addressKey('[::1]')).toBe('0:0:0:0::/56')
  })

  test('X-Forwarded-For counts only from a trusted proxy, and only when its last entry is a plain IP', () => {
    const req = (xff: string) => new Request('http://x/', { headers: { 'x-forwarded-for': xff } })
    const proxies = parseAddressList('127.0.0.1,::1', 'RELAY_TRUST_PROXY')
    expect(clientAddress(req('10.0.0.1, 192.0.2.4'), '127.0.0.1', null)).toBe('127.0.0.1')
    expect(clientAddress(req('10.0.0.1, 192.0.2.4'), '127.0.0.1', proxies)).toBe('192.0.2.4')
    expect(clientAddress(req('10.0.0.1, 192.0.2.4'), '::1', proxies)).toBe('192.0.2.4')
    // a peer that is not the proxy names nobody but itself
    expect(clientAddress(req('192.0.2.4'), '198.51.100.3', proxies)).toBe('198.51.100.3')
    // not a plain IP: the socket's address counts
    for (const bad of ['evil', '192.0.2.4:8080', '192.000.2.4', '[2001:db8::1]', '2001:db8::1]:443', '', 'unknown', '192.0.2.4 x']) {
      expect(clientAddress(req(`10.0.0.1, ${bad}`), '127.0.0.1', proxies)).toBe('127.0.0.1')
    }
    expect(clientAddress(new Request('http://x/'), null, proxies)).toBeNull()
  })

  test('a list covering every address is refused, for exemptions and trusted proxies alike', () => {
    for (const all of ['0.0.0.0/0', '::/0', '10.0.0.1, 0.0.0.0/0']) {
      expect(() => parseAddressList(all, 'RELAY_TRUST_PROXY')).toThrow(/covers every address/)
    }
    expect(() => parseAddressList('true', 'RELAY_TRUST_PROXY')).toThrow(/RELAY_TRUST_PROXY: "true" is not an IP/)
    expect(() => parseAddressList('10.0.0.0/', 'RELAY_RATE_ADDRESS_EXEMPT')).toThrow(/not an IP address or CIDR/)
    expect(parseAddressList('10.0.0.0/8, ::1').check('10.1.2.3')).toBe(true)
  })
})

describe('what the runtime answers itself', () => {
  test('HTTP/1.0 without Host (HAProxy health checks) reaches /v1/health', async () => {
    const { port } = await listening()
    const c = await connection(port)
    await c.write('GET /v1/health HTTP/1.0\r\n\r\n')
    const a = await c.answer()
    expect(a.status).toBe(200)
    expect(a.json.status).toBeDefined()
  })

  test('headers over the runtime limit: a bare 431 and the connection closed; a malformed request line: a bare 400', async () => {
    const { port } = await listening()
    const big = await connection(port)
    await big.write(head('GET', '/v1/health', { 'X-Filler': 'a'.repeat(70_000) }))
    await big.waitClosed()
    expect(big.rest()).toStartWith('HTTP/1.1 431 ')
    const bad = await connection(port)
    await bad.write('NOT A REQUEST\r\n\r\n')
    await bad.waitClosed()
    expect(bad.rest()).toStartWith('HTTP/1.1 400 ')
  })
})
