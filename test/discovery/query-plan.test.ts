/**
 * Every discovery and catalog statement reads through an index (EXPLAIN QUERY PLAN), never a scan of
 * all agents or all tag rows. The plans are taken from the exact SQL the repository runs.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { DiscoveryFilter } from '../../src/services/models/records.ts'
import type { TextDriver } from '../../src/storage/sqlite/discovery-store.ts'
import type { SqliteStorage } from '../../src/storage/sqlite/sqlite-storage.ts'
import { startTestRelay, type TestRelay } from '../support/harness.ts'
import { agentWith } from './helpers.ts'

let t: TestRelay
beforeAll(async () => {
  t = await startTestRelay()
  // the tags must exist, or the repository answers "empty" without running a statement
  for (let i = 0; i < 3; i++) await agentWith(t, { display_name: `a${i}`, capabilities: [{ name: 'x', tags: ['t1', 't2', 't3'] }] })
})
afterAll(() => t.close())

const base: DiscoveryFilter = { tags: [], words: [], nameContains: null, activeSince: null, after: null, limit: 21 }
const after = { lastActiveAt: Date.parse('2026-11-22T10:00:00Z'), publicKey: 'A'.repeat(43) }
const optional = { nameContains: 'a', activeSince: 1, after }

/** A plan line that walks a whole table: SCAN without an index (virtual-table scans are FTS index reads). */
const fullScan = (line: string) => /^SCAN /.test(line) && !/USING (COVERING )?INDEX|VIRTUAL TABLE/.test(line)

const shapes: [string, Partial<DiscoveryFilter>, TextDriver?][] = [
  ['one tag', { tags: ['t1'] }],
  ['three tags', { tags: ['t1', 't2', 't3'] }],
  ['tags + q + name + active_since + cursor', { tags: ['t1', 't2'], words: ['x'], ...optional }],
  ['q driven by its matches', { words: ['x'] }, 'matches'],
  ['q driven by recency', { words: ['x'] }, 'recency'],
  ['q + everything, by matches', { words: ['x', 'y'], ...optional }, 'matches'],
  ['q + everything, by recency', { words: ['x', 'y'], ...optional }, 'recency'],
  ['name', { nameContains: 'a' }],
  ['name + cursor', { nameContains: 'a', after }],
  ['active_since', { activeSince: 1 }],
  ['active_since + name + cursor', optional],
]

// plans without statistics (a relay never runs ANALYZE by itself), then with them
for (const analyzed of [false, true]) describe(`EXPLAIN QUERY PLAN${analyzed ? ' after ANALYZE' : ''}`, () => {
  beforeAll(() => {
    if (analyzed) t.relay.sqlite!.run('ANALYZE')
  })
  for (const [label, filter, driver] of shapes) {
    test(label, () => {
      const plan = (t.relay.storage as SqliteStorage).discovery.explain({ ...base, ...filter }, driver)
      expect(plan.length).toBeGreaterThan(0)
      expect(plan.filter(fullScan)).toEqual([])
      // the agents row is reached by an index or its rowid
      expect(plan.some((l) => /\b(SEARCH|SCAN) a USING (COVERING )?(INDEX|INTEGER PRIMARY KEY)/.test(l))).toBe(true)
      if (filter.tags?.length) expect(plan.some((l) => l.includes('agent_tags_listing_idx'))).toBe(true)
      if (!filter.tags?.length && !filter.words?.length) expect(plan.some((l) => l.includes('agents_discover_idx'))).toBe(true)
      // driven along an index in result order, no sort of all candidates is needed
      if (filter.tags?.length || driver === 'recency' || !filter.words?.length) expect(plan.some((l) => l.includes('TEMP B-TREE'))).toBe(false)
    })
  }

  test('the catalog reads tag_counts through its indexes', () => {
    for (const prefix of ['', 'code']) {
      const plan = (t.relay.storage as SqliteStorage).discovery.explainCatalog(prefix)
      expect(plan.filter(fullScan)).toEqual([])
      expect(plan.some((l) => /tag_counts USING (COVERING )?INDEX/.test(l))).toBe(true)
    }
  })
})
