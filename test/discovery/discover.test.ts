/** GET /v1/discover (docs/protocol.md §3): each parameter alone and combined, visibility rules, freshness. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import type { RelayClient } from '../../src/client/index.ts'
import { startTestRelay, type TestRelay } from '../support/harness.ts'
import { agentWith, discoverRaw, keysOf, sorted, touch } from './helpers.ts'

let t: TestRelay
let me: RelayClient
beforeAll(async () => {
  t = await startTestRelay()
  me = t.client()
})
afterAll(() => t.close())

/** A word no other test uses: 10 lower-case letters. */
const word = () => Array.from(randomBytes(10), (b) => String.fromCharCode(97 + (b % 26))).join('')

describe('entries', () => {
  test('hold exactly public_key, display_name, last_active_at, capabilities; display_name null when unset', async () => {
    const tag = word()
    const caps = [{ name: 'echo', description: 'Echoes', tags: [tag], input_schema: { type: 'object' }, version: '1.2.0' }]
    const named = await agentWith(t, { display_name: 'Named', capabilities: caps, metadata: { secret: 1 }, inbox_policy: 'open' })
    t.clock.advance(1)
    const unnamed = await agentWith(t, { capabilities: caps })
    const res = await me.discover({ tag })
    expect(res.agents.map((a) => a.public_key)).toEqual([unnamed.publicKey, named.publicKey])
    expect(Object.keys(res.agents[0])).toEqual(['public_key', 'display_name', 'last_active_at', 'capabilities'])
    expect(res.agents[0].display_name).toBeNull()
    expect(Object.keys(res.agents[1])).toEqual(['public_key', 'display_name', 'last_active_at', 'capabilities'])
    expect(res.agents[1]).toEqual({
      public_key: named.publicKey,
      display_name: 'Named',
      last_active_at: (await named.getAgent()).last_active_at,
      capabilities: [{ ...caps[0], tags: [tag] }],
    })
    expect(res.agents[1].last_active_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
    expect(res).toMatchObject({ has_more: false, next_cursor: null })
  })

  test('are ordered by last_active_at descending, then public_key ascending', async () => {
    const tag = word()
    const same = await Promise.all([1, 2, 3].map(() => agentWith(t, { capabilities: [{ name: 'x', tags: [tag] }] })))
    t.clock.advance(5)
    const newest = await agentWith(t, { capabilities: [{ name: 'x', tags: [tag] }] })
    expect(await keysOf(me, { tag })).toEqual([newest.publicKey, ...sorted(same.map((c) => c.publicKey))])
  })
})

describe('tag', () => {
  test('alone, case-insensitive, repeatable with AND across three tags', async () => {
    const [a, b, c] = [word(), word(), word()]
    const abc = await agentWith(t, { capabilities: [{ name: 'one', tags: [a, b] }, { name: 'two', tags: [c.toUpperCase()] }] })
    const ab = await agentWith(t, { capabilities: [{ name: 'one', tags: [a, b] }] })
    const ac = await agentWith(t, { capabilities: [{ name: 'one', tags: [a] }, { name: 'two', tags: [c] }] })
    expect(sorted(await keysOf(me, { tag: a.toUpperCase() }))).toEqual(sorted([abc.publicKey, ab.publicKey, ac.publicKey]))
    expect(sorted(await keysOf(me, { tag: [a, b] }))).toEqual(sorted([abc.publicKey, ab.publicKey]))
    expect(await keysOf(me, { tag: [a, b, c] })).toEqual([abc.publicKey])
    expect(await keysOf(me, { tag: [c.toUpperCase(), a, b.toUpperCase()] })).toEqual([abc.publicKey])
    expect(await keysOf(me, { tag: [a, b, c, word()] })).toEqual([])
    // the same tag twice is the same condition
    expect(sorted(await keysOf(me, { tag: [a, a.toUpperCase()] }))).toHaveLength(3)
  })

  test('tags allow every character of their alphabet', async () => {
    const tag = `x:${word()}.v1_beta-2`
    const c = await agentWith(t, { capabilities: [{ name: 'one', tags: [tag] }] })
    expect(await keysOf(me, { tag })).toEqual([c.publicKey])
  })
})

describe('q', () => {
  test('searches capability names, descriptions and display names', async () => {
    const [n, d, dn] = [word(), word(), word()]
    const byName = await agentWith(t, { capabilities: [{ name: `${n}-tool` }] })
    const byDescription = await agentWith(t, { capabilities: [{ name: 'x', description: `It does ${d} well` }] })
    const byDisplayName = await agentWith(t, { display_name: `The ${dn} agent`, capabilities: [] })
    expect(await keysOf(me, { q: n })).toEqual([byName.publicKey])
    expect(await keysOf(me, { q: d })).toEqual([byDescription.publicKey])
    expect(await keysOf(me, { q: dn })).toEqual([byDisplayName.publicKey])
  })

  test('each word matches as a prefix, words are ANDed, case and diacritics are ignored', async () => {
    const [w1, w2] = [word(), word()]
    const both = await agentWith(t, { display_name: `Café ${w1}`, capabilities: [{ name: 'x', description: `${w2}ing things` }] })
    const first = await agentWith(t, { capabilities: [{ name: 'x', description: `${w1}s only` }] })
    expect(sorted(await keysOf(me, { q: w1.slice(0, 5) }))).toEqual(sorted([both.publicKey, first.publicKey]))
    expect(await keysOf(me, { q: `${w1.slice(0, 4).toUpperCase()} ${w2.slice(0, 3)}` })).toEqual([both.publicKey])
    expect(await keysOf(me, { q: `${w2} ${w1}` })).toEqual([both.publicKey])
    expect(await keysOf(me, { q: `cafe ${w1}` })).toEqual([both.publicKey])
    expect(await keysOf(me, { q: `${w1} nothingmatchesthis` })).toEqual([])
    // a word is not matched in the middle of another
    expect(await keysOf(me, { q: w1.slice(2) })).toEqual([])
  })

  test('punctuation and operators are text: quotes and * find the words inside, OR/AND/NOT are words', async () => {
    const [w1, w2] = [word(), word()]
    const c = await agentWith(t, { capabilities: [{ name: `${w1}-${w2}`, description: 'x' }] })
    const orange = await agentWith(t, { capabilities: [{ name: w1, description: 'an orange android, nothing else' }] })
    expect(await keysOf(me, { q: `${w1}-${w2}` })).toEqual([c.publicKey])
    expect(await keysOf(me, { q: `"${w1}" ${w2}*` })).toEqual([c.publicKey])
    expect(await keysOf(me, { q: `(${w1}) ${w2}:` })).toEqual([c.publicKey])
    expect(sorted(await keysOf(me, { q: `${w1} *** !!!` }))).toEqual(sorted([orange.publicKey, c.publicKey]))
    // not operators: each must match as a word prefix
    expect(await keysOf(me, { q: `${w1} OR ${w2}` })).toEqual([])
    expect(await keysOf(me, { q: `${w1} OR` })).toEqual([orange.publicKey])
    expect(await keysOf(me, { q: `${w1} AND NOT` })).toEqual([orange.publicKey])
  })

  test('a q of punctuation only matches nothing; an empty q counts as absent', async () => {
    expect(await me.discover({ q: '!!! ***' })).toEqual({ agents: [], has_more: false, next_cursor: null })
    const r = await discoverRaw(me, '?q=')
    expect(r.status).toBe(200)
    const tag = word()
    const c = await agentWith(t, { capabilities: [{ name: 'x', tags: [tag] }] })
    expect(await keysOf(me, { tag, q: '' })).toEqual([c.publicKey])
  })
})

describe('no filter', () => {
  test('GET /v1/discover and ?limit=20 list public, active agents, most recently active first', async () => {
    const own = await startTestRelay()
    try {
      const c = own.client()
      const first = await agentWith(own, { display_name: 'first' })
      own.clock.advance(1000)
      const hidden = await agentWith(own, { visibility: 'private' })
      const second = await agentWith(own, { display_name: 'second' })
      const gone = await agentWith(own, {})
      await own.relay.services.agents.suspend(gone.publicKey, null)
      await touch(own, first)
      const bare = await c.transport.send('GET', '/v1/discover')
      expect(bare.status).toBe(200)
      const page: any = await bare.json()
      expect(page.agents.map((a: any) => a.public_key)).toEqual([first.publicKey, second.publicKey])
      expect(page.has_more).toBe(false)
      expect(page.agents.map((a: any) => a.public_key)).not.toContain(hidden.publicKey)
      const limited: any = await (await c.transport.send('GET', '/v1/discover?limit=20')).json()
      expect(limited.agents.map((a: any) => a.public_key)).toEqual([first.publicKey, second.publicKey])
      const one: any = await (await c.transport.send('GET', '/v1/discover?limit=1')).json()
      expect([one.agents.length, one.has_more]).toEqual([1, true])
      const next: any = await (await c.transport.send('GET', `/v1/discover?limit=1&cursor=${one.next_cursor}`)).json()
      expect(next.agents.map((a: any) => a.public_key)).toEqual([second.publicKey])
    } finally {
      await own.close()
    }
  })
})

describe('name', () => {
  test('case-insensitive substring of display_name', async () => {
    const w = word()
    const c = await agentWith(t, { display_name: `Big ${w.toUpperCase()} Bot` })
    expect(await keysOf(me, { name: w.slice(2, 8) })).toEqual([c.publicKey])
    expect(await keysOf(me, { name: `g ${w}` })).toEqual([c.publicKey])
    expect(await keysOf(me, { name: `${w}x` })).toEqual([])
  })

  test('% and _ and \\ are literal', async () => {
    const w = word()
    const pct = await agentWith(t, { display_name: `${w} 100% sure` })
    const under = await agentWith(t, { display_name: `${w} a_b` })
    const slash = await agentWith(t, { display_name: `${w} back\\slash` })
    await agentWith(t, { display_name: `${w} 1000 sure axb backslash` })
    expect(await keysOf(me, { name: `${w} 100%` })).toEqual([pct.publicKey])
    expect(await keysOf(me, { name: '0% s' })).toEqual([pct.publicKey])
    expect(await keysOf(me, { name: `${w} A_B` })).toEqual([under.publicKey])
    expect(await keysOf(me, { name: 'k\\s' })).toEqual([slash.publicKey])
    expect(await keysOf(me, { name: `${w}%sure` })).toEqual([])
  })
})

describe('active_since', () => {
  test('alone: agents active at or after it, any offset', async () => {
    t.clock.advance(60_000)
    const at = t.clock.now()
    const c = await agentWith(t, { capabilities: [] })
    t.clock.advance(1)
    const later = await agentWith(t, { capabilities: [] })
    expect(await keysOf(me, { active_since: new Date(at) })).toEqual([later.publicKey, c.publicKey])
    expect(await keysOf(me, { active_since: new Date(at + 1) })).toEqual([later.publicKey])
    const offset = new Date(at + 1 + 3_600_000).toISOString().replace('Z', '+01:00')
    expect(await keysOf(me, { active_since: offset })).toEqual([later.publicKey])
    expect(await keysOf(me, { active_since: new Date(at + 2) })).toEqual([])
  })
})

describe('combined', () => {
  test('tag, q, name and active_since all apply together', async () => {
    const [tag, w, n] = [word(), word(), word()]
    t.clock.advance(60_000)
    const old = await agentWith(t, { display_name: `${n} old`, capabilities: [{ name: 'x', description: w, tags: [tag] }] })
    t.clock.advance(1000)
    const since = t.clock.now()
    const all = await agentWith(t, { display_name: `${n} all`, capabilities: [{ name: 'x', description: w, tags: [tag] }] })
    const noTag = await agentWith(t, { display_name: `${n} notag`, capabilities: [{ name: 'x', description: w }] })
    const noWord = await agentWith(t, { display_name: `${n} noword`, capabilities: [{ name: 'x', tags: [tag] }] })
    const noName = await agentWith(t, { display_name: 'other', capabilities: [{ name: 'x', description: w, tags: [tag] }] })
    const everyone = [old, all, noTag, noWord, noName].map((c) => c.publicKey)
    const q = { tag, q: w, name: n, active_since: new Date(since) }
    expect(await keysOf(me, q)).toEqual([all.publicKey])
    expect(sorted(await keysOf(me, { tag, q: w }))).toEqual(sorted([old, all, noName].map((c) => c.publicKey)))
    expect(sorted(await keysOf(me, { tag, name: n }))).toEqual(sorted([old, all, noWord].map((c) => c.publicKey)))
    expect(sorted(await keysOf(me, { q: w, name: n }))).toEqual(sorted([old, all, noTag].map((c) => c.publicKey)))
    expect(sorted(await keysOf(me, { tag, active_since: new Date(since) }))).toEqual(sorted([all, noWord, noName].map((c) => c.publicKey)))
    expect(sorted(await keysOf(me, { q: w, active_since: new Date(since) }))).toEqual(sorted([all, noTag, noName].map((c) => c.publicKey)))
    expect(sorted(await keysOf(me, { name: n, active_since: new Date(since) }))).toEqual(sorted([all, noTag, noWord].map((c) => c.publicKey)))
    expect(everyone).toHaveLength(5)
  })
})

describe('limit and cursor', () => {
  test('limit defaults to 20; has_more and next_cursor agree; the last page has neither', async () => {
    const tag = word()
    const made: string[] = []
    for (let i = 0; i < 23; i++) {
      t.clock.advance(1)
      made.unshift((await agentWith(t, { capabilities: [{ name: 'x', tags: [tag] }] })).publicKey)
    }
    const first = await me.discover({ tag })
    expect(first.agents).toHaveLength(20)
    expect(first.has_more).toBe(true)
    expect(typeof first.next_cursor).toBe('string')
    const second = await me.discover({ tag, cursor: first.next_cursor! })
    expect(second).toMatchObject({ has_more: false, next_cursor: null })
    expect([...first.agents, ...second.agents].map((a) => a.public_key)).toEqual(made)
    // exactly `limit` matches: no further page
    const exact = await me.discover({ tag, limit: 23 })
    expect(exact).toMatchObject({ has_more: false, next_cursor: null })
    expect(exact.agents).toHaveLength(23)
    const one = await me.discover({ tag, limit: 1 })
    expect(one.agents.map((a) => a.public_key)).toEqual([made[0]])
    const hundred = await me.discover({ tag, limit: 100 })
    expect(hundred.agents).toHaveLength(23)
  })

  test('the same cursor works with each search shape', async () => {
    const [tag, w] = [word(), word()]
    const made: string[] = []
    for (let i = 0; i < 5; i++) {
      t.clock.advance(1)
      made.unshift((await agentWith(t, { display_name: `${w} ${i}`, capabilities: [{ name: w, tags: [tag] }] })).publicKey)
    }
    for (const query of [{ tag }, { q: w }, { name: w }, { tag, q: w, name: w }]) {
      const all: string[] = []
      let cursor: string | undefined
      do {
        const page = await me.discover({ ...query, limit: 2, cursor })
        all.push(...page.agents.map((a) => a.public_key))
        cursor = page.next_cursor ?? undefined
      } while (cursor)
      expect(all).toEqual(made)
    }
  })
})

describe('who appears', () => {
  test('private agents never appear; auto-created agents are private', async () => {
    const tag = word()
    const hidden = await agentWith(t, { visibility: 'private', display_name: tag, capabilities: [{ name: tag, tags: [tag] }] })
    await hidden.getAgent()
    for (const query of [{ tag }, { q: tag }, { name: tag }]) expect(await keysOf(me, query)).toEqual([])
    expect(await keysOf(me, { active_since: new Date(t.clock.now()) })).not.toContain(hidden.publicKey)
    expect((await me.capabilities({ prefix: tag })).length).toBe(0)
  })

  test('visibility changes take effect at once, both ways', async () => {
    const tag = word()
    const c = await agentWith(t, { display_name: tag, capabilities: [{ name: tag, tags: [tag] }] })
    expect(await keysOf(me, { tag })).toEqual([c.publicKey])
    await c.updateProfile({ visibility: 'private' })
    for (const query of [{ tag }, { q: tag }, { name: tag }]) expect(await keysOf(me, query)).toEqual([])
    expect(await me.capabilities({ prefix: tag })).toEqual([])
    await c.updateProfile({ visibility: 'public' })
    for (const query of [{ tag }, { q: tag }, { name: tag }]) expect(await keysOf(me, query)).toEqual([c.publicKey])
    expect(await me.capabilities({ prefix: tag })).toEqual([{ tag, agent_count: 1 }])
  })

  test('suspension removes an agent at once; reinstatement brings it back', async () => {
    const tag = word()
    const c = await agentWith(t, { display_name: tag, capabilities: [{ name: tag, tags: [tag] }] })
    const since = new Date(t.clock.now())
    await t.relay.services.agents.suspend(c.publicKey, 'spam')
    for (const query of [{ tag }, { q: tag }, { name: tag }, { active_since: since }]) expect(await keysOf(me, query)).not.toContain(c.publicKey)
    expect(await me.capabilities({ prefix: tag })).toEqual([])
    await t.relay.services.agents.unsuspend(c.publicKey)
    expect(await keysOf(me, { tag })).toEqual([c.publicKey])
  })

  test('a deleted agent disappears with its tags', async () => {
    const tag = word()
    const c = await agentWith(t, { display_name: tag, capabilities: [{ name: tag, tags: [tag] }] })
    await c.deleteAgent()
    for (const query of [{ tag }, { q: tag }, { name: tag }]) expect(await keysOf(me, query)).toEqual([])
    expect(await me.capabilities({ prefix: tag })).toEqual([])
  })

  test('profile updates are searchable at once, and old words and tags stop matching', async () => {
    const [oldTag, newTag, oldWord, newWord, oldName, newName] = [word(), word(), word(), word(), word(), word()]
    const c = await agentWith(t, { display_name: oldName, capabilities: [{ name: 'x', description: oldWord, tags: [oldTag] }] })
    await c.updateProfile({ display_name: newName, capabilities: [{ name: 'x', description: newWord, tags: [newTag] }] })
    expect(await keysOf(me, { tag: newTag })).toEqual([c.publicKey])
    expect(await keysOf(me, { q: newWord })).toEqual([c.publicKey])
    expect(await keysOf(me, { q: newName })).toEqual([c.publicKey])
    expect(await keysOf(me, { name: newName })).toEqual([c.publicKey])
    for (const query of [{ tag: oldTag }, { q: oldWord }, { q: oldName }, { name: oldName }]) expect(await keysOf(me, query)).toEqual([])
    await c.updateProfile({ display_name: null, capabilities: [] })
    for (const query of [{ tag: newTag }, { q: newWord }, { name: newName }]) expect(await keysOf(me, query)).toEqual([])
  })

  test('activity moves an agent to the front', async () => {
    const tag = word()
    const a = await agentWith(t, { capabilities: [{ name: 'x', tags: [tag] }] })
    t.clock.advance(1)
    const b = await agentWith(t, { capabilities: [{ name: 'x', tags: [tag] }] })
    expect(await keysOf(me, { tag })).toEqual([b.publicKey, a.publicKey])
    await touch(t, a)
    expect(await keysOf(me, { tag })).toEqual([a.publicKey, b.publicKey])
    const entry = (await me.discover({ tag })).agents[0]
    expect(entry.last_active_at).toBe(new Date(t.clock.now()).toISOString())
  })
})
