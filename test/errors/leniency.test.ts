/**
 * The leniency rule (docs/protocol.md, "What the relay ignores") walked over every operation of the
 * relay's own OpenAPI document, so an endpoint added later is covered or this file fails:
 * - every JSON body takes unknown fields (at the top and in the objects it nests) and neither stores
 *   nor echoes them;
 * - every query parameter given with an empty value is the same as leaving it out;
 * - every WebSocket client frame takes unknown fields.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { generateKeyPair } from '../../src/auth/sign.ts'
import type { RelayClient } from '../../src/client/index.ts'
import { startTestRelay, type TestRelay } from '../support/harness.ts'
import { WsProbe, authFrame } from '../support/ws.ts'

const adminKeys = generateKeyPair()
let t: TestRelay
let wsUrl: string
let doc: any
let me: RelayClient
let admin: RelayClient
let peer: RelayClient

/** Fields no endpoint defines, among them names of Object.prototype members. */
const UNKNOWN = '"priority":"high","toString":7,"constructor":{"prototype":{"polluted":true}},"__proto__":{"polluted":true},"x_unknown":[1]'
const withUnknown = (body: Record<string, unknown>) => {
  const text = JSON.stringify(body)
  return text === '{}' ? `{${UNKNOWN}}` : `{${UNKNOWN},${text.slice(1)}`
}
const nestedExtra = { x_unknown: 1, priority: 'low' }

beforeAll(async () => {
  t = await startTestRelay({
    host: '127.0.0.1',
    admin: { keys: [adminKeys.publicKey] },
    rateLimits: { sendPerMin: 0, pollPerMin: 0, requestsPerMin: 0 },
  })
  wsUrl = `ws://127.0.0.1:${(await t.relay.start()).port}/v1/ws`
  me = t.client()
  admin = t.client(adminKeys)
  peer = t.client()
  await peer.updateProfile({ visibility: 'public', capabilities: [{ name: 'lenient', tags: ['lenient'] }] })
  doc = await (await me.transport.send('GET', '/v1/openapi.json')).json()
})
afterAll(() => t.close())

/** Every `METHOD /path` of the document, with its operation. */
function operations(): [string, any][] {
  const out: [string, any][] = []
  for (const [path, item] of Object.entries<any>(doc.paths)) {
    for (const method of ['get', 'put', 'post', 'patch', 'delete', 'head']) if (item[method]) out.push([`${method.toUpperCase()} ${path}`, item[method]])
  }
  return out
}

/** A valid JSON body for each operation that takes one, with unknown fields in the objects it nests. */
const BODIES: Record<string, () => Record<string, unknown>> = {
  'PATCH /v1/agents/{publicKey}': () => ({ display_name: 'Lenient', capabilities: [{ name: 'c', tags: ['c'], ...nestedExtra }] }),
  'POST /v1/agents/{publicKey}/capabilities': () => ({ capabilities: [{ name: 'c', version: null, input_schema: null, ...nestedExtra }] }),
  'POST /v1/messages': () => ({ recipient_key: peer.publicKey, body: { text: 'hi' }, metadata: { kept: true } }),
  'PUT /v1/agents/{publicKey}/acl': () => ({ peer_key: generateKeyPair().publicKey, entry_type: 'allow' }),
  'PUT /v1/agents/{publicKey}/acl/{peerKey}': () => ({ entry_type: 'block' }),
  'PUT /v1/agents/{publicKey}/webhook': () => ({ url: 'https://hooks.example.com/in', secret: 'A'.repeat(43) }),
  'POST /v1/admin/agents/{publicKey}/suspend': () => ({ reason: 'lenient test' }),
  'POST /v1/admin/admission': () => ({ public_key: generateKeyPair().publicKey, note: 'n' }),
}

/** The query parameters each operation accepts: the document must list every one of them. */
const QUERY: Record<string, string[]> = {
  'GET /v1/discover': ['tag', 'q', 'name', 'active_since', 'limit', 'cursor'],
  'GET /v1/capabilities': ['prefix', 'limit'],
  'GET /v1/messages': ['cursor', 'limit', 'status', 'sender_key', 'in_reply_to', 'thread_id'],
  'GET /v1/messages/threads/{threadID}': ['cursor', 'limit'],
  'GET /v1/agents/{publicKey}/acl': ['entry_type', 'type'],
  'GET /v1/admin/agents': ['status', 'cursor', 'limit'],
  'GET /v1/admin/webhooks': ['limit'],
  'GET /v1/admin/errors': ['limit'],
}

/** The path with its parameters filled: the caller's own resources, a peer, a message and a blob of the caller. */
async function fill(path: string): Promise<string> {
  let out = path.replace('{publicKey}', path.startsWith('/v1/admin/') ? generateKeyPair().publicKey : 'me')
  out = out.replace('{peerKey}', peer.publicKey).replace('{threadID}', 'lenient-thread')
  if (out.includes('{messageID}')) out = out.replace('{messageID}', (await me.send({ recipient_key: peer.publicKey, body: 1 })).message_id)
  if (out.includes('{blobID}')) out = out.replace('{blobID}', (await me.uploadBlob(new Uint8Array([1, 2, 3]))).blob_id)
  return out
}

const callerOf = (path: string) => (path.startsWith('/v1/admin/') ? admin : me)
const queryNames = (op: any): string[] => (op.parameters ?? []).filter((p: any) => p.in === 'query').map((p: any) => p.name)

describe('unknown body fields are ignored on every endpoint', () => {
  test('the table holds a body for every operation that takes JSON', () => {
    const json = operations().filter(([, op]) => op.requestBody?.content?.['application/json']).map(([name]) => name)
    expect(json.sort()).toEqual(Object.keys(BODIES).sort())
  })

  for (const [name, body] of Object.entries(BODIES)) {
    test(name, async () => {
      const [method, path] = name.split(' ')
      const res = await callerOf(path).transport.send(method, await fill(path), withUnknown(body()), { 'content-type': 'application/json' })
      const text = await res.text()
      expect([name, res.status, res.status < 300 ? '' : text]).toEqual([name, res.status < 300 ? res.status : 200, ''])
      for (const field of ['priority', 'x_unknown', 'polluted', 'toString']) expect(text).not.toContain(field)
      expect(({} as any).polluted).toBeUndefined()
    })
  }

  test('and nothing of them is stored: the profile, capabilities and message read back without them', async () => {
    const profile = await (await me.transport.send('GET', '/v1/agents/me')).text()
    const sent = await me.send({ recipient_key: peer.publicKey, body: 2 })
    await me.transport.send('POST', '/v1/messages', withUnknown({ recipient_key: peer.publicKey, body: 3, attachments: [] }), { 'content-type': 'application/json' })
    const page = await (await peer.transport.send('GET', '/v1/messages?limit=100')).text()
    for (const text of [profile, page]) for (const field of ['priority', 'x_unknown', 'polluted']) expect(text).not.toContain(field)
    expect(page).toContain(sent.message_id)
  })
})

describe('an empty query value is an absent parameter on every endpoint', () => {
  test('the document lists every query parameter each operation accepts', () => {
    const documented = Object.fromEntries(operations().filter(([, op]) => queryNames(op).length > 0).map(([name, op]) => [name, queryNames(op).sort()]))
    expect(documented).toEqual(Object.fromEntries(Object.entries(QUERY).map(([k, v]) => [k, [...v].sort()])))
  })

  for (const [name, params] of Object.entries(QUERY)) {
    test(name, async () => {
      const path = await fill(name.split(' ')[1])
      const caller = callerOf(path)
      const plain = await caller.transport.send('GET', path)
      expect(plain.status).toBe(200)
      // each parameter empty alone, then all of them empty together
      for (const query of [...params.map((p) => `${p}=`), params.map((p) => `${p}=`).join('&')]) {
        const res = await caller.transport.send('GET', `${path}?${query}`)
        expect([query, res.status]).toEqual([query, 200])
      }
    })
  }
})

describe('unknown fields in WebSocket frames are ignored', () => {
  test('auth, send (both forms), ack and ping', async () => {
    const ws = await WsProbe.open(wsUrl)
    ws.send({ ...authFrame(t, me.transport.keys), ...nestedExtra })
    expect((await ws.next('auth_result')).status).toBe('ok')
    const peerWs = await WsProbe.authed(t, wsUrl, peer.transport.keys)
    try {
      ws.send({ type: 'send', id: 'n', message: { recipient_key: peer.publicKey, body: 'nested', ...nestedExtra }, ...nestedExtra })
      expect(await ws.next('send_result')).toMatchObject({ id: 'n' })
      ws.send({ type: 'send', id: 'f', recipient_key: peer.publicKey, body: 'flat', ...nestedExtra })
      expect(await ws.next('send_result')).toMatchObject({ id: 'f' })
      const first = await peerWs.next('message')
      const second = await peerWs.next('message')
      for (const m of [first, second]) expect(JSON.stringify(m)).not.toContain('x_unknown')
      peerWs.send({ type: 'ack', message_id: first.message.message_id, ...nestedExtra })
      expect(await peerWs.sync()).toEqual([])
      ws.send({ type: 'ping', ...nestedExtra })
      expect(await ws.next()).toEqual({ type: 'pong' })
    } finally {
      ws.close()
      peerWs.close()
    }
  })
})

describe('a body that is not an object', () => {
  test('is refused on every endpoint that needs one, saying what was given (never "undefined")', async () => {
    for (const [name] of Object.entries(BODIES)) {
      const [method, path] = name.split(' ')
      for (const raw of ['null', '[]', '"text"', '7', '']) {
        const res = await callerOf(path).transport.send(method, await fill(path), raw, { 'content-type': 'application/json' })
        const text = await res.text()
        expect(text).not.toContain('undefined')
        // a PATCH or a suspension without a body changes nothing, or suspends without a reason
        const optional = name.startsWith('PATCH') || name.includes('/suspend')
        if (optional && (raw === 'null' || raw === '')) continue
        if (name === 'POST /v1/agents/{publicKey}/capabilities' && raw === '[]') continue // the bare array form: no capabilities
        expect([name, raw, res.status]).toEqual([name, raw, 400])
        const kind = { null: 'null or an empty body', '[]': 'an array', '"text"': 'a string', '7': 'a number', '': 'null or an empty body' }[raw]!
        // {capabilities} or the bare array, and the admission's public_key: a missing body names the required field
        if (name === 'POST /v1/agents/{publicKey}/capabilities' || (name === 'POST /v1/admin/admission' && (raw === 'null' || raw === ''))) continue
        expect([name, raw, JSON.parse(text).error.details?.fields?.body ?? text]).toEqual([name, raw, expect.stringContaining(`not ${kind}`)])
      }
    }
  })
})
