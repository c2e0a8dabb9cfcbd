/** One attempt in isolation (docs/protocol.md §9): the body, the HMAC of the worked example, and where it connects. */
import { describe, expect, test } from 'bun:test'
import { createHmac } from 'node:crypto'
import { blockedAddressKind, isLocalhostName } from '../../src/delivery/address-policy.ts'
import { attemptDelivery, deliveryBody, signDelivery, type AttemptInput } from '../../src/delivery/webhook-request.ts'
import { decodeBase64Url } from '../../src/lib/base64url.ts'
import type { MessageRecord } from '../../src/services/models/records.ts'
import vectors from '../fixtures/test-vectors.json'

const row: MessageRecord = {
  messageId: 'msg_1795341600_a1b2c3d4e5f6',
  senderKey: '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo',
  recipientKey: 'PUAXw-hDiVqStwqnTRt-vJyYLM8uxJaMwM1V8Sr0Zgw',
  contentType: 'application/json',
  body: '{"text":"hello"}',
  attachments: null,
  threadId: null,
  inReplyTo: null,
  metadata: null,
  status: 'sent',
  createdAt: Date.parse('2026-11-22T10:00:00.000Z'),
  expiresAt: Date.parse('2026-11-29T10:00:00.000Z'),
  deliveredAt: null,
}

describe('body and signature', () => {
  test('the worked example of the test vectors', () => {
    const w = vectors.webhook
    const key = decodeBase64Url(w.secret)!
    expect(Buffer.from(key).toString('hex')).toBe(w.hmac_key_hex)
    expect(signDelivery(key, w.raw_body)).toBe(w.signature_header)
    // the vector's body is the relay's serialization of that message (plus the null fields, created_at, expires_at)
    const body = deliveryBody('dlv_0123456789ab', row, row.createdAt)
    expect(body.startsWith(w.raw_body.slice(0, -2))).toBe(true)
    expect(body).toBe(
      w.raw_body.slice(0, -2) + ',"thread_id":null,"in_reply_to":null,"metadata":null,"created_at":"2026-11-22T10:00:00.000Z","expires_at":"2026-11-29T10:00:00.000Z"}}',
    )
  })

  test('nullable fields: their value when set, null when not; attachments carry metadata only', () => {
    const attachments = [{ blob_id: 'blob_1', filename: 'a.pdf', content_type: 'application/pdf', size: 3, hash: 'ab', encrypted: false }]
    const full = JSON.parse(deliveryBody('dlv_x', { ...row, body: null, attachments: JSON.stringify(attachments), threadId: 't', inReplyTo: 'msg_1_000000000000', metadata: '{"a":1}' }, row.createdAt))
    expect(Object.keys(full.message)).toEqual(['message_id', 'sender_key', 'recipient_key', 'content_type', 'attachments', 'thread_id', 'in_reply_to', 'metadata', 'created_at', 'expires_at'])
    expect(full.message.attachments).toEqual(attachments)
    expect(full.message).not.toHaveProperty('status')
    const bare = JSON.parse(deliveryBody('dlv_y', row, row.createdAt))
    expect(bare.message).toMatchObject({ attachments: [], thread_id: null, in_reply_to: null, metadata: null })
  })
})

describe('where an attempt connects', () => {
  function recordingFetch(status = 204) {
    const calls: { url: string; init: any }[] = []
    const f = (async (url: string, init: any) => {
      calls.push({ url, init })
      return new Response(null, { status })
    }) as unknown as typeof fetch
    return { calls, f }
  }
  const base = (over: Partial<AttemptInput>): AttemptInput => ({
    fetch: fetch,
    url: 'http://hook.example:8080/in?x=1',
    body: '{}',
    secretBytes: new Uint8Array(32),
    deliveryId: 'dlv_x',
    now: 0,
    timeoutMs: 1000,
    allowPrivateTargets: false,
    resolve: async () => [{ address: '93.184.216.34', family: 4 }],
    ...over,
  })

  test('http: to the address that was resolved and checked, with the original Host header', async () => {
    const { calls, f } = recordingFetch()
    const res = await attemptDelivery(base({ fetch: f }))
    expect(res.outcome).toBe('success')
    expect(calls[0].url).toBe('http://93.184.216.34:8080/in?x=1')
    expect(calls[0].init.headers.host).toBe('hook.example:8080')
    expect(calls[0].init.redirect).toBe('manual')
    expect(calls[0].init.tls).toBeUndefined()
    expect(calls[0].init.headers['x-m2m-webhook-signature']).toBe(createHmac('sha256', new Uint8Array(32)).update('{}').digest('hex'))
    expect(calls[0].init.headers['x-m2m-webhook-timestamp']).toBe('1970-01-01T00:00:00.000Z')
    expect(calls[0].init.headers['x-m2m-delivery-id']).toBe('dlv_x')
  })

  test('https: the certificate and SNI are checked against the name, IPv6 in brackets', async () => {
    const { calls, f } = recordingFetch()
    await attemptDelivery(base({ fetch: f, url: 'https://hook.example/in', resolve: async () => [{ address: '2606:2800:220:1::1', family: 6 }] }))
    expect(calls[0].url).toBe('https://[2606:2800:220:1::1]/in')
    expect(calls[0].init.headers.host).toBe('hook.example')
    expect(calls[0].init.tls).toEqual({ serverName: 'hook.example' })
  })

  test('private targets allowed: the URL as registered, no resolution', async () => {
    const { calls, f } = recordingFetch()
    let resolved = false
    await attemptDelivery(base({ fetch: f, allowPrivateTargets: true, resolve: async () => ((resolved = true), []) }))
    expect(calls[0].url).toBe('http://hook.example:8080/in?x=1')
    expect(calls[0].init.headers.host).toBeUndefined()
    expect(resolved).toBe(false)
  })

  test('refused and failed resolutions make no request', async () => {
    const { calls, f } = recordingFetch()
    expect(await attemptDelivery(base({ fetch: f, url: 'http://[::ffff:10.0.0.1]/' }))).toMatchObject({ outcome: 'refused' })
    expect(await attemptDelivery(base({ fetch: f, url: 'http://api.localhost/' }))).toMatchObject({ outcome: 'refused' })
    expect(await attemptDelivery(base({ fetch: f, resolve: async () => [{ address: 'fd00::5', family: 6 }] }))).toMatchObject({ outcome: 'refused' })
    expect(await attemptDelivery(base({ fetch: f, resolve: async () => { throw new Error('ENOTFOUND') } }))).toMatchObject({ outcome: 'network_error' })
    expect(await attemptDelivery(base({ fetch: f, resolve: async () => [] }))).toMatchObject({ outcome: 'network_error' })
    expect(calls).toEqual([])
  })

  test('a resolver slower than the deadline is a timeout', async () => {
    const res = await attemptDelivery(base({ timeoutMs: 50, resolve: () => new Promise(() => {}) }))
    expect(res.outcome).toBe('timeout')
  })
})

describe('address policy', () => {
  const blocked = ['127.0.0.1', '127.255.255.254', '10.1.2.3', '172.16.0.1', '172.31.255.255', '192.168.0.1', '169.254.169.254', '100.64.0.1', '100.127.255.255', '0.0.0.0', '224.0.0.251', '239.255.255.250', '255.255.255.255', '::', '::1', 'fe80::1', 'febf::1', 'fc00::1', 'fdff::1', 'ff02::1', '::ffff:127.0.0.1', '::ffff:7f00:1', '::ffff:192.168.1.1', '::127.0.0.1', '::ffff:0:10.0.0.1', '64:ff9b::10.0.0.1', '2002:c0a8:0101::1', '[::1]',
    // documentation and other ranges the IANA special-purpose registries mark as not globally reachable
    '192.0.2.1', '198.51.100.7', '203.0.113.255', '192.88.99.1', '198.18.0.1', '198.19.255.255', '240.0.0.1', '0.1.2.3', '192.0.0.8',
    '2001:db8::1', '2001:db8:ffff::1', '100::1', '100::ffff:1', '2001::1', '2001:2::1', '2001:1ff::1', '3fff::1', '3fff:fff::1', '5f00::1',
    '64:ff9b:1::1', '64:ff9b::192.168.0.1', '64:ff9b::169.254.169.254', '::ffff:192.0.2.1', '2002:c633:6401::1']
  const allowed = ['8.8.8.8', '1.1.1.1', '100.128.0.1', '172.32.0.1', '172.15.255.255', '192.169.0.1', '93.184.216.34', '2606:4700:4700::1111', '::ffff:8.8.8.8', '64:ff9b::8.8.8.8', '2002:0808:0808::1', '192.0.3.1', '198.51.101.1', '203.0.112.1', '2001:200::1', '2001:db9::1', '4000::1', '101::1', '100:0:0:1::1']
  for (const a of blocked) test(`refuses ${a}`, () => expect(blockedAddressKind(a)).not.toBeNull())
  for (const a of allowed) test(`allows ${a}`, () => expect(blockedAddressKind(a)).toBeNull())
  test('names are not addresses', () => expect(blockedAddressKind('example.com')).toBe('invalid'))
  test('localhost names', () => {
    for (const h of ['localhost', 'LOCALHOST', 'localhost.', 'a.b.localhost']) expect(isLocalhostName(h)).toBe(true)
    for (const h of ['localhost.example', 'mylocalhost', 'example.com']) expect(isLocalhostName(h)).toBe(false)
  })
})
