/** GET /v1/capabilities (docs/protocol.md §3): tags of public active agents with counts, kept in step with profiles. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { RelayClient } from '../../src/client/index.ts'
import { expectError, startTestRelay, type TestRelay } from '../support/harness.ts'
import { agentWith } from './helpers.ts'

let t: TestRelay
let me: RelayClient
beforeAll(async () => {
  t = await startTestRelay()
  me = t.client()
})
afterAll(() => t.close())

/** The catalog recomputed from the agents table, as docs/protocol.md §3 defines it. */
async function recount(): Promise<{ tag: string; agent_count: number }[]> {
  const rows = await t.sql<{ capabilities: string }>(`SELECT capabilities FROM agents WHERE visibility = 'public' AND status = 'active'`)
  const counts = new Map<string, number>()
  for (const row of rows) {
    const tags = new Set((JSON.parse(row.capabilities) as { tags?: string[] }[]).flatMap((c) => c.tags ?? []))
    for (const tag of tags) counts.set(tag, (counts.get(tag) ?? 0) + 1)
  }
  return [...counts]
    .map(([tag, agent_count]) => ({ tag, agent_count }))
    .sort((a, b) => b.agent_count - a.agent_count || (a.tag < b.tag ? -1 : a.tag > b.tag ? 1 : 0))
}

describe('the catalog', () => {
  test('is empty on a fresh relay', async () => {
    expect(await me.capabilities()).toEqual([])
  })

  test('counts public active agents per tag, ordered by count desc then tag', async () => {
    // an agent with the same tag on two capabilities counts once
    await agentWith(t, { capabilities: [{ name: 'a', tags: ['nlp', 'Translation'] }, { name: 'b', tags: ['NLP', 'vision'] }] })
    await agentWith(t, { capabilities: [{ name: 'a', tags: ['nlp', 'audio'] }] })
    await agentWith(t, { capabilities: [{ name: 'a', tags: ['code', 'audio'] }] })
    await agentWith(t, { visibility: 'private', capabilities: [{ name: 'a', tags: ['code', 'secret'] }] })
    const res = await me.transport.json<{ capabilities: unknown[] }>('GET', '/v1/capabilities')
    expect(Object.keys(res)).toEqual(['capabilities'])
    expect(res.capabilities).toEqual([
      { tag: 'nlp', agent_count: 2 },
      { tag: 'audio', agent_count: 2 },
      { tag: 'code', agent_count: 1 },
      { tag: 'translation', agent_count: 1 },
      { tag: 'vision', agent_count: 1 },
    ].sort((a, b) => b.agent_count - a.agent_count || a.tag.localeCompare(b.tag)))
    expect(res.capabilities).toEqual(await recount())
  })

  test('prefix (case-insensitive) and limit', async () => {
    await agentWith(t, { capabilities: [{ name: 'a', tags: ['code:ts', 'code:go', 'codec'] }] })
    await agentWith(t, { capabilities: [{ name: 'a', tags: ['code:ts'] }] })
    expect(await me.capabilities({ prefix: 'code:' })).toEqual([
      { tag: 'code:ts', agent_count: 2 },
      { tag: 'code:go', agent_count: 1 },
    ])
    expect((await me.capabilities({ prefix: 'CODE' })).map((c) => c.tag)).toEqual(['code:ts', 'code', 'code:go', 'codec'])
    expect(await me.capabilities({ prefix: 'code', limit: 2 })).toEqual([
      { tag: 'code:ts', agent_count: 2 },
      { tag: 'code', agent_count: 1 },
    ])
    expect(await me.capabilities({ prefix: 'zzz' })).toEqual([])
    expect(await me.capabilities({ prefix: '' })).toEqual(await recount())
    expect(await me.capabilities({ limit: 1 })).toEqual((await recount()).slice(0, 1))
    expect(await me.capabilities({ limit: 1000 })).toEqual(await recount())
  })

  test('edits of many agents at the same moment keep every count right', async () => {
    const clients = await Promise.all(Array.from({ length: 12 }, () => agentWith(t, { capabilities: [{ name: 'a', tags: ['burst-a'] }] })))
    // at once: half move to another tag, half add one, some go private, some are deleted
    await Promise.all(
      clients.map((c, i) =>
        i % 4 === 0
          ? c.updateProfile({ capabilities: [{ name: 'a', tags: ['burst-b'] }] })
          : i % 4 === 1
            ? c.updateProfile({ capabilities: [{ name: 'a', tags: ['burst-a', 'burst-b'] }] })
            : i % 4 === 2
              ? c.updateProfile({ visibility: 'private' })
              : c.deleteAgent(),
      ),
    )
    expect(await me.capabilities({ prefix: 'burst-' })).toEqual([
      { tag: 'burst-b', agent_count: 6 },
      { tag: 'burst-a', agent_count: 3 },
    ])
    expect(await me.capabilities()).toEqual(await recount())
  })

  test('follows capability edits, visibility, suspension and deletion at once', async () => {
    const c = await agentWith(t, { capabilities: [{ name: 'a', tags: ['moving'] }] })
    const count = async () => (await me.capabilities({ prefix: 'moving' })).find((x) => x.tag === 'moving')?.agent_count ?? 0
    expect(await count()).toBe(1)
    await c.updateProfile({ capabilities: [{ name: 'a', tags: ['moved'] }] })
    expect(await count()).toBe(0)
    await c.updateProfile({ capabilities: [{ name: 'a', tags: ['moving'] }, { name: 'b', tags: ['MOVING'] }] })
    expect(await count()).toBe(1)
    await c.updateProfile({ visibility: 'private' })
    expect(await count()).toBe(0)
    // hidden agents still change their tags; the count stays 0 until they are public again
    await c.updateProfile({ capabilities: [{ name: 'a', tags: ['moving', 'other'] }] })
    expect(await count()).toBe(0)
    await c.updateProfile({ visibility: 'public', capabilities: [{ name: 'a', tags: ['moving'] }] })
    expect(await count()).toBe(1)
    await t.relay.services.agents.suspend(c.publicKey, null)
    expect(await count()).toBe(0)
    await t.relay.services.agents.unsuspend(c.publicKey)
    expect(await count()).toBe(1)
    await c.deleteAgent()
    expect(await count()).toBe(0)
    expect(await me.capabilities()).toEqual(await recount())
  })
})

describe('errors', () => {
  const cases: [string, string][] = [
    ['?limit=0', 'limit'],
    ['?limit=1001', 'limit'],
    ['?limit=abc', 'limit'],
    ['?prefix=a%20b', 'prefix'],
    [`?prefix=${'a'.repeat(65)}`, 'prefix'],
    ['?tag=nlp', 'tag'],
    ['?q=x', 'q'],
  ]
  test('?limit= and ?prefix= are absent parameters (200, the default)', async () => {
    for (const query of ['?limit=', '?prefix=', '?prefix=&limit=']) expect((await me.transport.send('GET', `/v1/capabilities${query}`)).status).toBe(200)
  })
  for (const [query, field] of cases) {
    test(`${query.slice(0, 30)} → 400 naming ${field}`, async () => {
      const err = await expectError(await me.transport.send('GET', `/v1/capabilities${query}`), 400, 'bad_request')
      expect(Object.keys(err.details.fields)).toContain(field)
    })
  }
})
