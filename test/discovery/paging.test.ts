/**
 * Paging (docs/protocol.md §3): a keyset cursor over (last_active_at desc, public_key). Walking 250 matching agents
 * while some of them become active between pages never returns an agent twice and never skips one whose
 * activity did not change; an agent that becomes active moves to the front of the order, so a walk that
 * has not reached it yet does not see it (the README says so).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { RelayClient } from '../../src/client/index.ts'
import { startTestRelay, type TestRelay } from '../support/harness.ts'
import { agentWith, touch } from './helpers.ts'

let t: TestRelay
let me: RelayClient
const agents: RelayClient[] = []
const TAG = 'paging-tag'

beforeAll(async () => {
  t = await startTestRelay()
  me = t.client()
  for (let i = 0; i < 250; i++) {
    // groups of five share one last_active_at, so the public_key tie-break is exercised on every page
    if (i % 5 === 0) t.clock.advance(1000)
    agents.push(await agentWith(t, { display_name: `pager ${i}`, capabilities: [{ name: 'page', description: 'pageable', tags: [TAG] }] }))
    if (i % 25 === 0) {
      await agentWith(t, { capabilities: [{ name: 'page', tags: ['other-tag'] }] })
      await agentWith(t, { visibility: 'private', capabilities: [{ name: 'page', tags: [TAG] }] })
    }
  }
}, 30_000) // 250 agents one request after another: seconds on PostgreSQL
afterAll(() => t.close())

/** Walks every page of a query; between pages `between` may change the world. */
async function walk(query: Parameters<RelayClient['discover']>[0], between: (seen: Set<string>) => Promise<void> = async () => {}) {
  const seen: string[] = []
  const pages: string[][] = []
  let cursor: string | undefined
  for (;;) {
    const page = await me.discover({ ...query, cursor })
    expect(page.next_cursor === null).toBe(!page.has_more)
    pages.push(page.agents.map((a) => a.public_key))
    seen.push(...page.agents.map((a) => a.public_key))
    // within a page: the docs/protocol.md §3 order
    for (let i = 1; i < page.agents.length; i++) {
      const [p, c] = [page.agents[i - 1], page.agents[i]]
      expect(p.last_active_at > c.last_active_at || (p.last_active_at === c.last_active_at && p.public_key < c.public_key)).toBe(true)
    }
    if (!page.has_more) break
    cursor = page.next_cursor!
    await between(new Set(seen))
  }
  return { seen, pages }
}

describe('paging through 250 matching agents', () => {
  test('a quiet walk returns each agent exactly once, in order', async () => {
    for (const query of [{ tag: TAG }, { q: 'pageable' }, { name: 'pager' }]) {
      const { seen, pages } = await walk({ ...query, limit: 20 })
      expect(pages).toHaveLength(13)
      expect(seen).toHaveLength(250)
      expect(new Set(seen).size).toBe(250)
      expect(new Set(seen)).toEqual(new Set(agents.map((a) => a.publicKey)))
    }
  })

  test('while agents become active between pages: no duplicates, no agent that stayed put is skipped', async () => {
    const movedBeforeSeen = new Set<string>()
    const movedAfterSeen = new Set<string>()
    let round = 0
    const { seen } = await walk({ tag: TAG, limit: 20 }, async (seenSoFar) => {
      round++
      const unseen = agents.filter((a) => !seenSoFar.has(a.publicKey) && !movedBeforeSeen.has(a.publicKey))
      const already = agents.filter((a) => seenSoFar.has(a.publicKey))
      // one agent not reached yet, one already returned, and (every other page) one from the very end
      const picks = [unseen[round * 3 % unseen.length], already[round * 7 % already.length]]
      if (round % 2 === 0) picks.push(unseen[unseen.length - 1])
      for (const c of picks) {
        if (!c) continue
        if (seenSoFar.has(c.publicKey)) movedAfterSeen.add(c.publicKey)
        else movedBeforeSeen.add(c.publicKey)
        await touch(t, c)
      }
    })
    expect(movedBeforeSeen.size).toBeGreaterThan(10)
    expect(movedAfterSeen.size).toBeGreaterThan(10)
    // never twice
    expect(new Set(seen).size).toBe(seen.length)
    // every agent whose activity did not change during the walk is returned
    const seenSet = new Set(seen)
    for (const a of agents) {
      if (!movedBeforeSeen.has(a.publicKey)) expect(seenSet.has(a.publicKey)).toBe(true)
    }
    // an agent that became active before the walk reached it moved ahead of the cursor: not in this walk
    for (const key of movedBeforeSeen) expect(seenSet.has(key)).toBe(false)
    expect(seen.length).toBe(250 - movedBeforeSeen.size)
    // a new walk sees everyone once, the recently active first
    const again = await walk({ tag: TAG, limit: 20 })
    expect(new Set(again.seen)).toEqual(new Set(agents.map((a) => a.publicKey)))
    expect(again.seen).toHaveLength(250)
    const moved = new Set([...movedBeforeSeen, ...movedAfterSeen])
    expect(new Set(again.seen.slice(0, moved.size))).toEqual(moved)
  })

  test('agents that leave between pages are not returned; the walk goes on', async () => {
    const gone = new Set<string>()
    const { seen } = await walk({ tag: TAG, limit: 25 }, async (seenSoFar) => {
      const next = agents.find((a) => !seenSoFar.has(a.publicKey) && !gone.has(a.publicKey))!
      gone.add(next.publicKey)
      await next.updateProfile({ visibility: 'private' })
    })
    expect(new Set(seen).size).toBe(seen.length)
    for (const key of gone) expect(seen).not.toContain(key)
    expect(seen.length).toBe(250 - gone.size)
    for (const c of agents) if (gone.has(c.publicKey)) await c.updateProfile({ visibility: 'public' })
  })

  test('a cursor from one query works as a position in another', async () => {
    const first = await me.discover({ tag: TAG, limit: 10 })
    const byName = await me.discover({ name: 'pager', limit: 10, cursor: first.next_cursor! })
    const byTag = await me.discover({ tag: TAG, limit: 10, cursor: first.next_cursor! })
    expect(byName.agents.map((a) => a.public_key)).toEqual(byTag.agents.map((a) => a.public_key))
  })
})
