/** Agents (docs/protocol.md §2): defaults, merge semantics, every limit, ownership, DELETE. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { RelayApiError, type RelayClient } from '../../src/client/index.ts'
import { expectError, startTestRelay, type TestRelay } from '../support/harness.ts'

let t: TestRelay
beforeAll(async () => {
  t = await startTestRelay()
})
afterAll(() => t.close())

async function patchError(c: RelayClient, body: unknown, field: string) {
  const res = await c.transport.send('PATCH', `/v1/agents/${c.publicKey}`, body)
  const err = await expectError(res, 400, 'bad_request')
  expect(Object.keys(err.details?.fields ?? {})).toContain(field)
  return err
}

const cap = (over: Record<string, unknown> = {}) => ({ name: 'translate', description: 'Translates text', tags: ['NLP', 'text'], ...over })

describe('PATCH merge semantics', () => {
  test('present fields replace whole, absent ones stay, null clears display_name', async () => {
    const c = t.client()
    let a = await c.updateProfile({ display_name: 'Alice', metadata: { a: 1, b: { c: 2 } }, capabilities: [cap()] })
    expect(a.display_name).toBe('Alice')
    expect(a.capabilities).toEqual([{ name: 'translate', description: 'Translates text', tags: ['nlp', 'text'] }])
    a = await c.updateProfile({ metadata: { z: true } })
    expect(a.metadata).toEqual({ z: true })
    expect(a.display_name).toBe('Alice')
    expect(a.capabilities).toHaveLength(1)
    a = await c.updateProfile({ visibility: 'public', inbox_policy: 'open' })
    expect([a.visibility, a.inbox_policy]).toEqual(['public', 'open'])
    a = await c.updateProfile({ display_name: null, capabilities: [] })
    expect(a.display_name).toBeNull()
    expect(a.capabilities).toEqual([])
    expect(a.metadata).toEqual({ z: true })
  })

  test('an empty body is a no-op returning 200', async () => {
    const c = t.client()
    await c.updateProfile({ display_name: 'Same' })
    const res = await c.transport.send('PATCH', `/v1/agents/${c.publicKey}`)
    expect(res.status).toBe(200)
    expect(((await res.json()) as any).display_name).toBe('Same')
    expect((await c.updateProfile({})).display_name).toBe('Same')
  })

  test('GET capabilities returns full definitions', async () => {
    const c = t.client()
    const full = cap({ input_schema: { type: 'object', properties: { text: { type: 'string' } } }, version: '1.2.0' })
    await c.updateProfile({ capabilities: [full] })
    const other = t.client()
    expect(await other.getCapabilities(c.publicKey)).toEqual([{ ...full, tags: ['nlp', 'text'] }])
  })
})

describe('limits of §2.1, each naming its field', () => {
  const c = () => t.client()
  test('display_name over 256', () => patchError(c(), { display_name: 'x'.repeat(257) }, 'display_name'))
  test('display_name of 256 is fine', async () => expect((await c().updateProfile({ display_name: 'x'.repeat(256) })).display_name).toHaveLength(256))
  test('visibility not an enum value', () => patchError(c(), { visibility: 'secret' }, 'visibility'))
  test('inbox_policy not an enum value', () => patchError(c(), { inbox_policy: 'maybe' }, 'inbox_policy'))
  test('metadata not an object', () => patchError(c(), { metadata: [1, 2] }, 'metadata'))
  test('metadata over 16 KiB', () => patchError(c(), { metadata: { big: 'x'.repeat(16 * 1024) } }, 'metadata'))
  test('metadata just under 16 KiB is fine', async () => {
    const m = { big: 'x'.repeat(16 * 1024 - 12) }
    expect(JSON.stringify(m).length).toBeLessThanOrEqual(16 * 1024)
    expect((await c().updateProfile({ metadata: m })).metadata).toEqual(m)
  })
  test('more than 20 capabilities', () =>
    patchError(c(), { capabilities: Array.from({ length: 21 }, (_, i) => ({ name: `c${i}` })) }, 'capabilities'))
  test('capability without a name', () => patchError(c(), { capabilities: [{ description: 'x' }] }, 'capabilities[0].name'))
  test('capability name empty', () => patchError(c(), { capabilities: [{ name: '' }] }, 'capabilities[0].name'))
  test('capability name over 128', () => patchError(c(), { capabilities: [{ name: 'n'.repeat(129) }] }, 'capabilities[0].name'))
  test('description over 2000', () =>
    patchError(c(), { capabilities: [{ name: 'a', description: 'd'.repeat(2001) }] }, 'capabilities[0].description'))
  test('more than 20 tags', () =>
    patchError(c(), { capabilities: [{ name: 'a', tags: Array.from({ length: 21 }, (_, i) => `t${i}`) }] }, 'capabilities[0].tags'))
  test('tag with a space', () => patchError(c(), { capabilities: [{ name: 'a', tags: ['bad tag'] }] }, 'capabilities[0].tags[0]'))
  test('tag over 64', () => patchError(c(), { capabilities: [{ name: 'a', tags: ['t'.repeat(65)] }] }, 'capabilities[0].tags[0]'))
  test('input_schema over 16 KiB', () =>
    patchError(c(), { capabilities: [{ name: 'a', input_schema: { d: 'x'.repeat(16 * 1024) } }] }, 'capabilities[0].input_schema'))
  test('version over 64', () => patchError(c(), { capabilities: [{ name: 'a', version: 'v'.repeat(65) }] }, 'capabilities[0].version'))
  test('duplicate capability names', () => patchError(c(), { capabilities: [{ name: 'a' }, { name: 'a' }] }, 'capabilities[1].name'))
  test('unknown fields, at the top and in a capability, are ignored and not stored', async () => {
    const cl = c()
    const res = await cl.transport.send(
      'PATCH',
      `/v1/agents/${cl.publicKey}`,
      '{"display_name":"ok","colour":"blue","toString":1,"constructor":{"prototype":{"x":1}},"__proto__":{"polluted":true},"capabilities":[{"name":"a","price":3,"__proto__":{"polluted":true}}]}',
      { 'content-type': 'application/json' },
    )
    expect(res.status).toBe(200)
    const p: any = await res.json()
    expect(p.display_name).toBe('ok')
    expect(p.capabilities).toEqual([{ name: 'a' }])
    for (const k of ['colour', 'toString', 'constructor']) expect(Object.hasOwn(p, k)).toBe(false)
    expect(({} as any).polluted).toBeUndefined()
    expect(await cl.getAgent()).toEqual(p)
  })
  test('null for a capability\'s optional fields means absent', async () => {
    const cl = c()
    const p = await cl.updateProfile({ capabilities: [{ name: 'a', description: null, tags: null, input_schema: null, version: null }] } as any)
    expect(p.capabilities).toEqual([{ name: 'a' }])
    await patchError(cl, { capabilities: [{ name: null }] }, 'capabilities[0].name')
  })
  test('wrong type for display_name', () => patchError(c(), { display_name: 42 }, 'display_name'))
  test('a body that is not an object', async () => {
    const cl = c()
    const res = await cl.transport.send('PATCH', `/v1/agents/${cl.publicKey}`, [1, 2, 3])
    await expectError(res, 400, 'bad_request')
  })
  test('tags are lower-cased and de-duplicated', async () => {
    const a = await c().updateProfile({ capabilities: [{ name: 'a', tags: ['Vision', 'vision', 'OCR'] }] })
    expect(a.capabilities[0].tags).toEqual(['vision', 'ocr'])
  })
})

describe('ownership and lookups', () => {
  test('PATCH someone else → 403 forbidden', async () => {
    const a = t.client()
    const b = t.client()
    await b.getAgent()
    await expectError(await a.transport.send('PATCH', `/v1/agents/${b.publicKey}`, { display_name: 'x' }), 403, 'forbidden')
  })
  test('DELETE someone else → 403 forbidden', async () => {
    const a = t.client()
    const b = t.client()
    await b.getAgent()
    await expectError(await a.transport.send('DELETE', `/v1/agents/${b.publicKey}`), 403, 'forbidden')
  })
  test('GET of an unknown key → 404 agent_not_found (and it is not created)', async () => {
    const unknown = generateKeyPair().publicKey
    await expectError(await t.client().transport.send('GET', `/v1/agents/${unknown}`), 404, 'agent_not_found')
    await expectError(await t.client().transport.send('GET', `/v1/agents/${unknown}/capabilities`), 404, 'agent_not_found')
    expect((await t.relay.storage.agents.find(unknown))).toBeNull()
  })
  test('GET with a malformed key in the path → 400', async () => {
    await expectError(await t.client().transport.send('GET', '/v1/agents/not-a-key'), 400, 'bad_request')
  })
  test('a private agent is readable by anyone who knows its key', async () => {
    const p = t.client()
    await p.updateProfile({ display_name: 'Hidden', visibility: 'private' })
    expect((await t.client().getAgent(p.publicKey)).display_name).toBe('Hidden')
  })
})

describe('at the same moment', () => {
  test('a new key making five requests at once: one agent record, five answers', async () => {
    const c = t.client()
    const answers = await Promise.all(Array.from({ length: 5 }, () => c.transport.send('GET', `/v1/agents/${c.publicKey}`)))
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200, 200])
    expect(await t.sql('SELECT count(*) AS n FROM agents WHERE public_key = ?', [c.publicKey])).toEqual([{ n: 1 }])
  })
  test('profile edits at once: the last one written is what every reader sees, tags included', async () => {
    const c = t.client()
    await c.getAgent()
    await Promise.all(Array.from({ length: 5 }, (_, i) => c.updateProfile({ display_name: `n${i}`, capabilities: [{ name: 'x', tags: [`t${i}`] }] })))
    const me = await c.getAgent()
    const i = Number(me.display_name!.slice(1))
    expect(me.capabilities).toEqual([{ name: 'x', tags: [`t${i}`] }])
    expect(await t.sql('SELECT tag FROM agent_tags WHERE public_key = ?', [c.publicKey])).toEqual([{ tag: `t${i}` }])
  })
})

describe('DELETE', () => {
  test('removes the agent; the key may come back as a fresh agent', async () => {
    const keys = generateKeyPair()
    const c = t.client(keys)
    await c.updateProfile({ display_name: 'Gone', capabilities: [cap()] })
    await t.sql(`INSERT INTO acl_entries (owner_key, peer_key, entry_type, created_at, updated_at) VALUES (?, ?, 'block', 1, 1)`, [keys.publicKey, generateKeyPair().publicKey])
    expect((await c.transport.send('DELETE', `/v1/agents/${keys.publicKey}`)).status).toBe(204)
    expect((await t.relay.storage.agents.find(keys.publicKey))).toBeNull()
    expect(await t.sql('SELECT count(*) AS n FROM acl_entries WHERE owner_key = ?', [keys.publicKey])).toEqual([{ n: 0 }])
    expect(await t.sql('SELECT count(*) AS n FROM agent_tags WHERE public_key = ?', [keys.publicKey])).toEqual([{ n: 0 }])
    await expectError(await t.client().transport.send('GET', `/v1/agents/${keys.publicKey}`), 404, 'agent_not_found')
    const again = await c.getAgent()
    expect(again.display_name).toBeNull()
    expect(again.capabilities).toEqual([])
  })
  test('204 has no body', async () => {
    const c = t.client()
    await c.getAgent()
    const res = await c.transport.send('DELETE', `/v1/agents/${c.publicKey}`)
    expect(res.status).toBe(204)
    expect(await res.text()).toBe('')
    expect(res.headers.get('x-request-id')).toMatch(/^req_/)
  })
  test('the client raises RelayApiError with code and request id', async () => {
    const c = t.client()
    try {
      await c.getAgent(generateKeyPair().publicKey)
      throw new Error('expected an error')
    } catch (err) {
      expect(err).toBeInstanceOf(RelayApiError)
      expect((err as RelayApiError).code).toBe('agent_not_found')
      expect((err as RelayApiError).requestId).toMatch(/^req_/)
    }
  })
})
