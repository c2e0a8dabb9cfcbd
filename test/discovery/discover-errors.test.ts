/** Discovery error paths (docs/protocol.md §3, §11): 400s with named fields, hostile input never a 500, auth first. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { RelayClient } from '../../src/client/index.ts'
import { BASE_URL, expectError, startTestRelay, type TestRelay } from '../support/harness.ts'
import { agentWith, discoverRaw } from './helpers.ts'

let t: TestRelay
let me: RelayClient
beforeAll(async () => {
  t = await startTestRelay()
  me = t.client()
  await agentWith(t, {
    display_name: 'Translator "quoted" 100% (beta)',
    capabilities: [{ name: 'translate', description: 'Translate text: NEAR-perfect AND fast, or not*', tags: ['nlp'] }],
  })
})
afterAll(() => t.close())

/** Form-encodes a value as URLSearchParams does (lone surrogates become U+FFFD, `'` is escaped). */
const enc = (value: string) => new URLSearchParams({ v: value }).toString().slice(2)

describe('400 bad_request naming the parameter', () => {
  const cases: [string, string, string][] = [
    ['unknown parameter', '?tag=nlp&tags=nlp', 'tags'],
    ['unknown parameter alone', '?foo=bar', 'foo'],
    ['limit 0', '?tag=nlp&limit=0', 'limit'],
    ['limit 101', '?tag=nlp&limit=101', 'limit'],
    ['limit negative', '?tag=nlp&limit=-1', 'limit'],
    ['limit not a number', '?tag=nlp&limit=ten', 'limit'],
    ['limit fractional', '?tag=nlp&limit=1.5', 'limit'],
    ['limit huge', '?tag=nlp&limit=99999999999999999999', 'limit'],
    ['cursor garbage', '?tag=nlp&cursor=garbage', 'cursor'],
    ['cursor base64 of other text', `?tag=nlp&cursor=${Buffer.from('1.abc').toString('base64url')}`, 'cursor'],
    ['cursor with padding', `?tag=nlp&cursor=${Buffer.from(`1.${'A'.repeat(43)}`).toString('base64')}=`, 'cursor'],
    ['cursor very long', `?tag=nlp&cursor=${'A'.repeat(5000)}`, 'cursor'],
    ['active_since not a date', '?active_since=yesterday', 'active_since'],
    ['active_since unix seconds', '?active_since=1795341600', 'active_since'],
    ['active_since impossible date', '?active_since=2026-13-45T10:00:00Z', 'active_since'],
    ['active_since without zone', '?active_since=2026-11-22T10:00:00', 'active_since'],
    ['tag with a space', `?tag=${enc('a b')}`, 'tag'],
    ['tag with a slash', '?tag=a/b', 'tag'],
    ['tag too long', `?tag=${'a'.repeat(65)}`, 'tag'],
    ['tag with unicode', `?tag=${enc('café')}`, 'tag'],
    ['21 tags', '?' + Array.from({ length: 21 }, (_, i) => `tag=t${i}`).join('&'), 'tag'],
    ['q too long', `?q=${'a'.repeat(513)}`, 'q'],
    ['q with too many words', `?q=${enc(Array.from({ length: 33 }, () => 'w').join(' '))}`, 'q'],
    ['name too long', `?name=${'a'.repeat(257)}`, 'name'],
    ['name with NUL', `?name=a%00b`, 'name'],
  ]
  for (const [label, query, field] of cases) {
    test(label, async () => {
      const err = await expectError(await me.transport.send('GET', `/v1/discover${query}`), 400, 'bad_request')
      expect(Object.keys(err.details?.fields ?? {})).toContain(field)
    })
  }
})

describe('no filter, or only empty values, lists every public agent (200)', () => {
  for (const query of ['', '?limit=20', '?limit=5', '?q=&name=', `?q=${enc('  \t ')}`, '?tag=nlp&limit=', '?tag=nlp&cursor=', '?active_since=', '?tag=']) {
    test(query || '(none)', async () => {
      const res = await me.transport.send('GET', `/v1/discover${query}`)
      expect(res.status).toBe(200)
      const body: any = await res.json()
      expect(body.agents.length).toBeGreaterThan(0)
    })
  }
})

describe('hostile q strings never give a 500', () => {
  const hostile = [
    '"', '""', '"""', "'", "''", '*', '**', '*a', 'a*', 'a**', '"a', 'a"', 'a"b"c', '"unterminated phrase',
    'OR', 'AND', 'NOT', 'NEAR', 'a OR b', 'a AND', 'AND a', 'NOT a', 'a NOT b', 'NEAR(a b)', 'NEAR(a b, 2)', 'NEAR/2',
    '(', ')', '()', '(a', 'a)', '((a) OR (b))', '^a', 'a^', 'a:b', 'display_name:x', 'capability_text : translate',
    '{display_name capability_text}: x', '- a', '-a', '+a', 'a + b', '\\', '\\"', '%', '_', '%_%', '[a-z]', '$1', '@@',
    "'; DROP TABLE agents; --", 'SELECT * FROM agents_fts', 'a\u0000b', '\u0000', '\u0001\u0002\u0003', '\u007f',
    '😀', '😀 translate', 'trans😀late', 'ｆｕｌｌｗｉｄｔｈ', 'café', 'CAFÉ', 'e\u0301', '\u0301', '中文 翻译', 'עברית',
    'العربية', '\u200b', '\u200d', '\u202etranslate', '\ufeff', '\ud800', '\udfff', '\uffff', '\u{10ffff}', '\u{e000}',
    'a'.repeat(512), Array.from({ length: 32 }, (_, i) => 'w' + i).join(' '), Array.from({ length: 32 }, () => 'a').join(' '),
    '\t\n\r', '.', ',', '!!!', '*"*', '" OR "', '"translate" OR "x"', 'translate* AND NOT *', 'NEAR("a" "b")',
    '""translate""', 'trans"late', 'transl\'ate',
  ]
  test(`the list has at least 30 entries (${hostile.length})`, () => expect(hostile.length).toBeGreaterThanOrEqual(30))
  for (const [i, q] of hostile.entries()) {
    test(`#${i} ${JSON.stringify(q).slice(0, 40)}`, async () => {
      const r = await discoverRaw(me, `?q=${enc(q)}`)
      expect(r.status === 200 || r.status === 400).toBe(true)
      if (r.status === 200) {
        expect(r.body).toHaveProperty('agents')
        expect(r.body.has_more).toBe(false)
      } else {
        expect(r.body.error.code).toBe('bad_request')
      }
      // with a tag too (another query shape), as a name, and as a catalog prefix
      expect([200, 400]).toContain((await discoverRaw(me, `?tag=nlp&q=${enc(q)}`)).status)
      expect([200, 400]).toContain((await discoverRaw(me, `?name=${enc(q)}`)).status)
      expect([200, 400]).toContain((await me.transport.send('GET', `/v1/capabilities?prefix=${enc(q)}`)).status)
    })
  }
  test('quoted words still find what they say', async () => {
    for (const q of ['"translate"', 'translate*', '(translate)', 'NEAR-perfect', 'translate: NEAR', '"quoted"', 'trans', 'TRANSLATOR 100%']) {
      const r = await discoverRaw(me, `?q=${enc(q)}`)
      expect(r.status).toBe(200)
      expect(r.body.agents).toHaveLength(1)
    }
  })
  test('raw percent-encoding oddities are text too', async () => {
    for (const raw of ['%', '%zz', '%E0%A4%A', '%ED%A0%80', '%C0%AF', '%FF%FE', '+', '%2B%2B', '&&&', '%26']) {
      for (const path of [`/v1/discover?q=${raw}`, `/v1/discover?name=${raw}`, `/v1/capabilities?prefix=${raw}`]) {
        expect([200, 400]).toContain((await me.transport.send('GET', path)).status)
      }
    }
  })
})

describe('authentication comes first', () => {
  test('an unsigned request is 401 even with bad parameters', async () => {
    await expectError(await t.handle(new Request(`${BASE_URL}/v1/discover?bogus=1&limit=0`)), 401, 'unauthorized')
    await expectError(await t.handle(new Request(`${BASE_URL}/v1/capabilities?limit=0`)), 401, 'unauthorized')
  })

  test('a suspended caller gets 403 agent_suspended', async () => {
    const c = t.client()
    await c.getAgent()
    await t.relay.services.agents.suspend(c.publicKey, null)
    await expectError(await c.transport.send('GET', '/v1/discover?tag=nlp'), 403, 'agent_suspended')
    await expectError(await c.transport.send('GET', '/v1/capabilities'), 403, 'agent_suspended')
  })

  test('wrong methods are 404 not_found', async () => {
    await expectError(await me.transport.send('POST', '/v1/discover?tag=nlp', {}), 404, 'not_found')
    await expectError(await me.transport.send('DELETE', '/v1/capabilities'), 404, 'not_found')
  })
})
