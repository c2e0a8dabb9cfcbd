/**
 * Hostile input gets a 400 in the envelope naming what is wrong, never a 500: nesting beyond the
 * documented depth, values whose `toString` is not a function, path segments that are not UTF-8,
 * unpaired surrogates in stored strings; and lengths count characters, not UTF-16 units.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { MAX_JSON_DEPTH } from '../../src/lib/json-text.ts'
import { expectError, startTestRelay, type TestRelay } from '../support/harness.ts'
import { signed } from '../support/signed.ts'
import { WsProbe } from '../support/ws.ts'

let t: TestRelay
beforeAll(async () => {
  t = await startTestRelay({ rateLimits: { sendPerMin: 0, pollPerMin: 0, requestsPerMin: 0 } })
})
afterAll(() => t.close())

const me = generateKeyPair()
const mine = `/v1/agents/${me.publicKey}`
const send = (method: string, path: string, body?: string) => t.handle(signed(me, method, path, { nowMs: t.clock.now(), body }))
/** A JSON array nested `depth` levels. */
const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth)

describe(`JSON nesting is limited to ${MAX_JSON_DEPTH} levels`, () => {
  test('exactly the limit is accepted (the request object counts as one level)', async () => {
    const body = `{"recipient_key":"${me.publicKey}","body":${nested(MAX_JSON_DEPTH - 1)}}`
    expect((await send('POST', '/v1/messages', body)).status).toBe(201)
  })
  for (const depth of [MAX_JSON_DEPTH + 1, 5_000, 100_000]) {
    for (const [what, body] of [
      ['a message body', `{"recipient_key":"${me.publicKey}","body":${nested(depth)}}`],
      ['profile metadata', `{"metadata":{"a":${nested(depth)}}}`],
      ['a bare array', nested(depth)],
      ['unclosed brackets', '{"a":'.repeat(depth)],
    ] as const) {
      test(`${depth} levels in ${what} → 400 naming the limit`, async () => {
        const path = what === 'a message body' ? '/v1/messages' : mine
        const err = await expectError(await send(what === 'a message body' ? 'POST' : 'PATCH', path, body), 400, 'bad_request')
        expect(err.message).toContain(`deeper than ${MAX_JSON_DEPTH} levels`)
        expect(err.details).toEqual({ max_depth: MAX_JSON_DEPTH })
      })
    }
  }
  test('a deep WebSocket frame gets an error frame; the connection stays', async () => {
    const { url } = await t.relay.start()
    const ws = await WsProbe.authed(t, url.replace('http', 'ws') + '/v1/ws', me)
    try {
      ws.send(`{"type":"send","id":1,"message":{"recipient_key":"${me.publicKey}","body":${nested(100_000)}}}`)
      const err = await ws.next('error')
      expect(err.error.code).toBe('bad_request')
      expect(err.error.message).toContain(`deeper than ${MAX_JSON_DEPTH} levels`)
      ws.send({ type: 'ping' })
      expect((await ws.next('pong')).type).toBe('pong')
    } finally {
      ws.close()
    }
  })
})

describe('values whose toString is not callable', () => {
  const cases: [string, string, string][] = [
    ['capabilities[0].name', '{"capabilities":[{"name":{"toString":0}}]}', 'must be a string'],
    ['capabilities[0].name', '{"capabilities":[{"name":{"toString":1}}]}', 'must be a string'],
    ['capabilities[0].tags[0]', '{"capabilities":[{"name":"x","tags":[{"toString":0}]}]}', 'must be a string'],
    ['capabilities[0].description', '{"capabilities":[{"name":"x","description":{"valueOf":0,"toString":0}}]}', 'must be a string'],
    ['display_name', '{"display_name":{"toString":0}}', 'must be a string or null'],
    ['visibility', '{"visibility":{"toString":0}}', 'must be one of public, private'],
    ['inbox_policy', '{"inbox_policy":{"toString":null}}', 'must be one of open, closed, allowlist, blocklist'],
  ]
  for (const [field, body, problem] of cases) {
    test(`${body} → 400 naming ${field}`, async () => {
      const err = await expectError(await send('PATCH', mine, body), 400, 'bad_request')
      expect(err.details.fields[field]).toBe(problem)
    })
  }
  test('in a message and in an ACL entry', async () => {
    const e1 = await expectError(await send('POST', '/v1/messages', `{"recipient_key":"${me.publicKey}","body":1,"thread_id":{"toString":0}}`), 400, 'bad_request')
    expect(e1.details.fields.thread_id).toBe('must be a string')
    const e2 = await expectError(await send('PUT', `${mine}/acl/${generateKeyPair().publicKey}`, '{"entry_type":{"toString":0}}'), 400, 'bad_request')
    expect(e2.details.fields.entry_type).toBe('must be one of allow, block')
  })
})

describe('path segments that are not percent-encoded UTF-8 → 400 naming the parameter', () => {
  const peer = generateKeyPair().publicKey
  const routes: [string, (seg: string) => string, string][] = [
    ['GET', (s) => `/v1/agents/${s}`, 'publicKey'],
    ['PATCH', (s) => `/v1/agents/${s}`, 'publicKey'],
    ['DELETE', (s) => `/v1/agents/${s}`, 'publicKey'],
    ['GET', (s) => `/v1/agents/${s}/capabilities`, 'publicKey'],
    ['GET', (s) => `/v1/agents/${s}/acl`, 'publicKey'],
    ['GET', (s) => `${mine}/acl/${s}`, 'peerKey'],
    ['PUT', (s) => `${mine}/acl/${s}`, 'peerKey'],
    ['DELETE', (s) => `/v1/agents/${s}/acl/${peer}`, 'publicKey'],
    ['PUT', (s) => `/v1/agents/${s}/webhook`, 'publicKey'],
    ['GET', (s) => `/v1/agents/${s}/webhook`, 'publicKey'],
    ['DELETE', (s) => `/v1/agents/${s}/webhook`, 'publicKey'],
    ['GET', (s) => `/v1/messages/${s}`, 'messageID'],
    ['GET', (s) => `/v1/messages/${s}/status`, 'messageID'],
    ['GET', (s) => `/v1/messages/threads/${s}`, 'threadID'],
    ['GET', (s) => `/v1/messages/threads/${s}?limit=1`, 'threadID'],
    ['GET', (s) => `/v1/blobs/${s}`, 'blobID'],
    ['DELETE', (s) => `/v1/blobs/${s}`, 'blobID'],
  ]
  for (const seg of ['%ff%fe', '%ED%A0%80', '%C0%AF', 'a%E2%82', '%F4%90%80%80']) {
    for (const [method, path, param] of routes) {
      test(`${method} ${path(seg)}`, async () => {
        const body = method === 'PUT' || method === 'PATCH' ? '{}' : undefined
        const err = await expectError(await send(method, path(seg), body), 400, 'bad_request')
        expect(err.details.fields[param]).toBe('is not valid percent-encoded UTF-8')
      })
    }
  }
  test('HEAD on a blob with such a segment answers 400 without a body', async () => {
    const res = await send('HEAD', '/v1/blobs/%ff')
    expect(res.status).toBe(400)
    expect(res.headers.get('x-request-id')).toMatch(/^req_/)
  })
  test('a well-formed non-ASCII segment is decoded: a thread id in Japanese', async () => {
    const res = await send('GET', `/v1/messages/threads/${encodeURIComponent('スレッド')}`)
    expect(res.status).toBe(200)
  })
})

describe('lengths count characters (code points)', () => {
  const emoji = '😀'
  test('a display name of 129 emoji (258 UTF-16 units) is accepted; 257 characters are not', async () => {
    const ok = await send('PATCH', mine, JSON.stringify({ display_name: emoji.repeat(129) }))
    expect(ok.status).toBe(200)
    expect(((await ok.json()) as any).display_name).toBe(emoji.repeat(129))
    expect((await send('PATCH', mine, JSON.stringify({ display_name: emoji.repeat(256) }))).status).toBe(200)
    const err = await expectError(await send('PATCH', mine, JSON.stringify({ display_name: emoji.repeat(257) })), 400, 'bad_request')
    expect(err.details.fields.display_name).toBe('must be at most 256 characters (it has 257)')
  })
  test('thread ids, capability names and content types too', async () => {
    const thread = emoji.repeat(128)
    const body = JSON.stringify({ recipient_key: me.publicKey, body: 1, thread_id: thread, content_type: 'é'.repeat(255) })
    expect((await send('POST', '/v1/messages', body)).status).toBe(201)
    expect((await send('GET', `/v1/messages/threads/${encodeURIComponent(thread)}`)).status).toBe(200)
    expect((await send('GET', `/v1/messages?thread_id=${encodeURIComponent(thread)}`)).status).toBe(200)
    const long = await expectError(await send('GET', `/v1/messages/threads/${encodeURIComponent(emoji.repeat(129))}`), 400, 'bad_request')
    expect(long.details.fields.threadID).toBe('must be at most 128 characters (it has 129)')
    expect((await send('PATCH', mine, JSON.stringify({ capabilities: [{ name: emoji.repeat(128) }] }))).status).toBe(200)
    const cap = await expectError(await send('PATCH', mine, JSON.stringify({ capabilities: [{ name: emoji.repeat(129) }] })), 400, 'bad_request')
    expect(cap.details.fields['capabilities[0].name']).toBe('must be at most 128 characters (it has 129)')
  })
})

describe('unpaired surrogates', () => {
  const lone = ['"\\ud800"', '"a\\udc00b"', '"\\ud800\\ud800"', '"\\udbff"']
  for (const text of lone) {
    test(`${text} is refused where the relay stores text`, async () => {
      const where: [string, string, string, string][] = [
        ['PATCH', mine, `{"display_name":${text}}`, 'display_name'],
        ['PATCH', mine, `{"capabilities":[{"name":${text}}]}`, 'capabilities[0].name'],
        ['PATCH', mine, `{"capabilities":[{"name":"x","description":${text}}]}`, 'capabilities[0].description'],
        ['PATCH', mine, `{"capabilities":[${text}]}`, 'capabilities[0]'],
        ['POST', '/v1/messages', `{"recipient_key":"${me.publicKey}","body":1,"thread_id":${text}}`, 'thread_id'],
        ['POST', '/v1/messages', `{"recipient_key":"${me.publicKey}","body":1,"in_reply_to":${text}}`, 'in_reply_to'],
        ['POST', '/v1/messages', `{"recipient_key":"${me.publicKey}","body":1,"content_type":${text}}`, 'content_type'],
      ]
      for (const [method, path, body, field] of where) {
        const err = await expectError(await send(method, path, body), 400, 'bad_request')
        expect(err.details.fields[field]).toBe('must be well-formed Unicode (it contains an unpaired surrogate)')
      }
    })
  }
  test('a paired surrogate escape is fine and counts as one character', async () => {
    const res = await send('PATCH', mine, '{"display_name":"\\ud83d\\ude00"}')
    expect(res.status).toBe(200)
    expect(((await res.json()) as any).display_name).toBe('😀')
  })
  test('inside free JSON (profile metadata, its keys) they are kept exactly', async () => {
    const res = await send('PATCH', mine, '{"metadata":{"\\ud800":"\\udfff"}}')
    expect(res.status).toBe(200)
    const text = await (await send('GET', mine)).text()
    expect(text).toContain('"metadata":{"\\ud800":"\\udfff"}')
  })
})

describe('query values that are not percent-encoded UTF-8 → 400 naming the parameter', () => {
  const queries: [string, string][] = [
    ['/v1/discover?q=%ff', 'q'],
    ['/v1/discover?q=ok&name=%ED%A0%80', 'name'],
    ['/v1/capabilities?prefix=%C0%AF', 'prefix'],
    ['/v1/messages?thread_id=%E2%82', 'thread_id'],
    ['/v1/messages/threads/t?cursor=%', 'cursor'],
    [`${mine}/acl?entry_type=a%zzb`, 'entry_type'],
    ['/v1/blobs/blob_000000000000000000000000?x=%ff', 'x'],
  ]
  for (const [path, field] of queries) {
    test(path, async () => {
      const err = await expectError(await send('GET', path), 400, 'bad_request')
      expect(err.details.fields[field]).toBe('is not valid percent-encoded UTF-8')
    })
  }
  test('valid encodings decode: + is a space, %2B a plus, and empty pieces are skipped', async () => {
    await send('PATCH', mine, JSON.stringify({ visibility: 'public', display_name: 'a+b c' }))
    const res = await send('GET', '/v1/discover?&&name=a%2Bb+c&')
    expect(res.status).toBe(200)
    expect(((await res.json()) as any).agents.map((a: any) => a.public_key)).toContain(me.publicKey)
  })
})
