/** The authentication matrix of docs/protocol.md §1.2, in process with a fake clock. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { ed25519 } from '@noble/curves/ed25519.js'
import { bodyHash, canonicalString } from '../../src/auth/canonical.ts'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { encodeBase64Url } from '../../src/lib/base64url.ts'
import { CLOCK_SKEW_MARGIN_MS } from '../../src/services/authenticator.ts'
import { BASE_URL, expectError, startTestRelay, type TestRelay } from '../support/harness.ts'
import { signed, uniqueTimestamp } from '../support/signed.ts'

let t: TestRelay
beforeAll(async () => {
  t = await startTestRelay()
})
afterAll(() => t.close())

const me = generateKeyPair()
const windowKey = generateKeyPair()
const path = () => `/v1/agents/${me.publicKey}`
const now = () => t.clock.now()

describe('step 1: headers present and well-formed → 401 unauthorized', () => {
  test('no headers at all', async () => {
    await expectError(await t.handle(new Request(BASE_URL + path())), 401, 'unauthorized')
  })
  for (const missing of ['X-M2M-Public-Key', 'X-M2M-Timestamp', 'X-M2M-Signature']) {
    test(`missing ${missing}`, async () => {
      const req = signed(me, 'GET', path(), { nowMs: now() })
      req.headers.delete(missing)
      await expectError(await t.handle(req), 401, 'unauthorized')
    })
  }
  const malformed: [string, string, string][] = [
    ['key too short', 'X-M2M-Public-Key', me.publicKey.slice(1)],
    ['key with padding char', 'X-M2M-Public-Key', me.publicKey.slice(0, 42) + '='],
    ['key in base64 alphabet', 'X-M2M-Public-Key', me.publicKey.slice(0, 42) + '+'],
    ['signature too short', 'X-M2M-Signature', 'AAAA'],
    ['signature not base64url', 'X-M2M-Signature', '!'.repeat(86)],
    ['timestamp not RFC 3339', 'X-M2M-Timestamp', 'yesterday'],
    ['timestamp unix seconds', 'X-M2M-Timestamp', '1795341600'],
    ['timestamp impossible date', 'X-M2M-Timestamp', '2026-13-45T10:00:00Z'],
  ]
  for (const [name, header, value] of malformed) {
    test(name, async () => {
      const req = signed(me, 'GET', path(), { nowMs: now(), headers: { [header]: value } })
      await expectError(await t.handle(req), 401, 'unauthorized')
    })
  }
  test('failed authentication never creates an agent', async () => {
    const stranger = generateKeyPair()
    const req = signed(stranger, 'GET', `/v1/agents/${stranger.publicKey}`, { nowMs: now(), headers: { 'X-M2M-Signature': 'A'.repeat(86) } })
    await expectError(await t.handle(req), 401, 'invalid_signature')
    expect((await t.relay.storage.agents.find(stranger.publicKey))).toBeNull()
  })
})

describe('step 2: timestamp window ±300 s → 401 timestamp_expired', () => {
  for (const [offset, ok] of [
    [0, true],
    [299_999, true],
    [-299_999, true],
    [300_000, true],
    [-300_000, true],
    [300_001, false],
    [-300_001, false],
    [3_600_000, false],
  ] as const) {
    test(`offset ${offset} ms → ${ok ? 'accepted' : 'refused'}`, async () => {
      const ts = new Date(now() + offset).toISOString()
      // a key of its own: explicit timestamps must not collide with other tests' signatures
      const res = await t.handle(signed(windowKey, 'GET', `/v1/agents/${windowKey.publicKey}`, { timestamp: ts }))
      if (ok) expect(res.status).toBe(200)
      else await expectError(res, 401, 'timestamp_expired')
    })
  }
  test('an offset timestamp is accepted byte for byte', async () => {
    const d = new Date(now() + 1234)
    const ts = new Date(d.getTime() + 3600_000).toISOString().replace('Z', '+01:00')
    expect((await t.handle(signed(windowKey, 'GET', `/v1/agents/${windowKey.publicKey}`, { timestamp: ts }))).status).toBe(200)
  })
})

describe('step 3: signature → 401 invalid_signature', () => {
  const body = JSON.stringify({ display_name: 'Me' })
  const cases: [string, Parameters<typeof signed>[3]][] = [
    ['tampered method', { body, sign: { method: 'POST' } }],
    ['tampered path', { body, sign: { path: `/v1/agents/${generateKeyPair().publicKey}` } }],
    ['tampered body', { body, sign: { body: JSON.stringify({ display_name: 'Other' }) } }],
    ['tampered timestamp', { body, sign: { timestamp: '2026-11-22T09:59:59.000Z' } }],
  ]
  for (const [name, opts] of cases) {
    test(name, async () => {
      await expectError(await t.handle(signed(me, 'PATCH', path(), { nowMs: now(), ...opts })), 401, 'invalid_signature')
    })
  }
  test('tampered query string', async () => {
    const p = `/v1/agents/${me.publicKey}/capabilities?x=1`
    const req = signed(me, 'GET', p, { nowMs: now(), sign: { path: `/v1/agents/${me.publicKey}/capabilities?x=2` } })
    await expectError(await t.handle(req), 401, 'invalid_signature')
  })
  test('query string re-ordered after signing', async () => {
    const req = signed(me, 'GET', `${path()}/capabilities?a=1&b=2`, { nowMs: now(), sign: { path: `${path()}/capabilities?b=2&a=1` } })
    await expectError(await t.handle(req), 401, 'invalid_signature')
  })
  test('signed with another key', async () => {
    const other = generateKeyPair()
    const req = signed(other, 'GET', path(), { nowMs: now(), headers: { 'X-M2M-Public-Key': me.publicKey } })
    await expectError(await t.handle(req), 401, 'invalid_signature')
  })
  test('the body is not processed when the signature fails', async () => {
    const req = signed(me, 'PATCH', path(), { nowMs: now(), body: '{"display_name":"Hacked"}', sign: { body: '{}' } })
    await expectError(await t.handle(req), 401, 'invalid_signature')
    expect((await t.client(me).getAgent()).display_name).not.toBe('Hacked')
  })
})

describe('step 4: replay → 409 replay_detected', () => {
  test('the same request twice', async () => {
    const req = signed(me, 'GET', path(), { nowMs: now() })
    const copy = req.clone() as Request
    expect((await t.handle(req)).status).toBe(200)
    await expectError(await t.handle(copy), 409, 'replay_detected')
  })
  test('the same request five times at once: one answer, four replays', async () => {
    const req = signed(me, 'GET', path(), { nowMs: now() })
    const copies = Array.from({ length: 5 }, () => req.clone() as Request)
    const statuses = (await Promise.all(copies.map((c) => t.handle(c)))).map((r) => r.status)
    expect(statuses.sort()).toEqual([200, 409, 409, 409, 409])
  })
  test('a replay is refused after a restart', async () => {
    const req = signed(me, 'GET', path(), { nowMs: now() })
    const copy = req.clone() as Request
    expect((await t.handle(req)).status).toBe(200)
    await t.restart()
    await expectError(await t.handle(copy), 409, 'replay_detected')
  })
  test('a replay is refused after a crash (no graceful stop): the entry was committed before the answer', async () => {
    const req = signed(me, 'GET', path(), { nowMs: now() })
    const copy = req.clone() as Request
    expect((await t.handle(req)).status).toBe(200)
    // a second relay process on the same data, the first never stopped
    const other = await t.another()
    await expectError(await other.handle(copy), 409, 'replay_detected')
    await other.stop()
  })

  test('replay cache entries are pruned only after twice the window and the clock-skew margin of cluster mode', async () => {
    const req = signed(me, 'GET', path(), { nowMs: now() })
    expect((await t.handle(req)).status).toBe(200)
    const before = await t.replayEntries()
    expect(before).toBeGreaterThan(0)
    t.clock.advance(599_000 + CLOCK_SKEW_MARGIN_MS)
    await t.relay.scheduler.runNow('prune-replay-cache')
    expect(await t.replayEntries()).toBe(before)
    t.clock.advance(2_000)
    await t.relay.scheduler.runNow('prune-replay-cache')
    expect(await t.replayEntries()).toBe(0)
  })
})

describe('step 5: agents', () => {
  test('an unknown key is created with the defaults of §2.1', async () => {
    const fresh = generateKeyPair()
    const agent = await t.client(fresh).getAgent()
    expect(agent).toEqual({
      public_key: fresh.publicKey,
      display_name: null,
      status: 'active',
      visibility: 'private',
      inbox_policy: 'blocklist',
      created_at: new Date(now()).toISOString(),
      last_active_at: new Date(now()).toISOString(),
      metadata: {},
      capabilities: [],
    })
  })
  test('a suspended agent gets 403 agent_suspended everywhere', async () => {
    const bad = generateKeyPair()
    await t.client(bad).getAgent()
    await t.relay.services.agents.suspend(bad.publicKey, 'spam')
    await expectError(await t.handle(signed(bad, 'GET', `/v1/agents/${me.publicKey}`, { nowMs: now() })), 403, 'agent_suspended')
    await expectError(
      await t.handle(signed(bad, 'PATCH', `/v1/agents/${bad.publicKey}`, { nowMs: now(), body: '{}' })),
      403,
      'agent_suspended',
    )
    await expectError(await t.handle(signed(bad, 'DELETE', `/v1/agents/${bad.publicKey}`, { nowMs: now() })), 403, 'agent_suspended')
    await t.relay.services.agents.unsuspend(bad.publicKey)
    expect((await t.client(bad).getAgent()).status).toBe('active')
  })
  test('last_active_at writes are coalesced to one per 10 s', async () => {
    const k = generateKeyPair()
    const c = t.client(k)
    const created = (await c.getAgent()).last_active_at
    t.clock.advance(5_000)
    expect((await c.getAgent()).last_active_at).toBe(created)
    t.clock.advance(5_000)
    expect((await c.getAgent()).last_active_at).toBe(new Date(now()).toISOString())
  })
})

describe('independent implementation', () => {
  test('a request signed with @noble/curves directly verifies', async () => {
    const seed = ed25519.utils.randomSecretKey()
    const publicKey = encodeBase64Url(ed25519.getPublicKey(seed))
    const body = JSON.stringify({ display_name: 'noble' })
    const p = `/v1/agents/${publicKey}`
    const ts = uniqueTimestamp(now())
    const text = canonicalString('PATCH', p, ts, bodyHash(body))
    const signature = encodeBase64Url(ed25519.sign(new TextEncoder().encode(text), seed))
    const res = await t.handle(
      new Request(BASE_URL + p, {
        method: 'PATCH',
        headers: { 'X-M2M-Public-Key': publicKey, 'X-M2M-Timestamp': ts, 'X-M2M-Signature': signature, 'content-type': 'application/json' },
        body,
      }),
    )
    expect(res.status).toBe(200)
    expect(((await res.json()) as any).display_name).toBe('noble')
  })
})

describe('keys are canonical everywhere a key is accepted', () => {
  // the same 32 bytes spelled with non-zero unused trailing bits: decodes leniently to the same key
  const variant = (key: string) => {
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'
    const last = alphabet.indexOf(key[42])
    return key.slice(0, 42) + alphabet[last | 1]
  }
  test('non-canonical spellings are refused as recipients, ACL peers, path keys, filters and headers', async () => {
    const a = t.client()
    const b = t.client()
    await b.getAgent()
    const odd = variant(b.publicKey)
    expect(odd).not.toBe(b.publicKey)
    expect(Buffer.from(odd, 'base64url').equals(Buffer.from(b.publicKey, 'base64url'))).toBe(true)
    const send = await a.transport.send('POST', '/v1/messages', { recipient_key: odd, body: 1 })
    expect(send.status).toBe(400)
    expect(((await send.json()) as any).error.details.fields.recipient_key).toContain('canonical')
    expect((await a.transport.send('PUT', `/v1/agents/${a.publicKey}/acl/${odd}`, { entry_type: 'block' })).status).toBe(400)
    expect((await a.transport.send('PUT', `/v1/agents/${a.publicKey}/acl`, { peer_key: odd, entry_type: 'block' })).status).toBe(400)
    expect((await a.transport.send('GET', `/v1/agents/${odd}`)).status).toBe(400)
    expect((await a.transport.send('GET', `/v1/messages?sender_key=${odd}`)).status).toBe(400)
    // a request signed by b's key but naming it in the non-canonical spelling
    const req = b.transport.buildRequest('GET', '/v1/agents/me')
    req.headers.set('x-m2m-public-key', odd)
    expect((await t.handle(req)).status).toBe(401)
    // the canonical spellings work
    expect((await a.transport.send('POST', '/v1/messages', { recipient_key: b.publicKey, body: 1 })).status).toBe(201)
  })
})
