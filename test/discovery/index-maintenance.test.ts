/**
 * The discovery indexes kept by triggers (migrations/0003): after any mix of profile edits, visibility
 * flips, activity, suspensions and deletions, agent_tags, tag_counts and agents_fts equal what the agents
 * table implies. Also: upgrading a database written before 0002/0003 fills them in.
 */
import { Database } from 'bun:sqlite'
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { MIGRATION_JOURNAL, MIGRATION_SQL } from '../../src/storage/sqlite/embedded-migrations.ts'
import { migrate } from '../../src/storage/sqlite/migrate.ts'
import { startTestRelay, tempDir, type TestRelay } from '../support/harness.ts'

let t: TestRelay
beforeAll(async () => {
  t = await startTestRelay()
})
afterAll(() => t.close())

let seed = 7
const random = () => ((seed = (seed * 16807) % 2147483647) - 1) / 2147483646
const pick = <T>(xs: T[]) => xs[Math.floor(random() * xs.length)]
const TAGS = ['nlp', 'NLP', 'vision', 'code:ts', 'audio', 'x.y-z_1', 'rare']
const WORDS = ['translate', 'summarize', 'café', 'vision', 'otter', 'Zebra']

function randomCapabilities() {
  return Array.from({ length: Math.floor(random() * 4) }, (_, i) => ({
    name: `${pick(WORDS)}-${i}`,
    ...(random() < 0.7 ? { description: `${pick(WORDS)} ${pick(WORDS)}` } : {}),
    ...(random() < 0.8 ? { tags: Array.from({ length: Math.floor(random() * 4) }, () => pick(TAGS)) } : {}),
  }))
}

/** Compares every derived table with what the agents table says. */
function checkIndexes(db: Database) {
  const agents = db
    .query<{ rowid: number; public_key: string; display_name: string | null; capabilities: string; visibility: string; status: string; last_active_at: number }, []>(
      'SELECT rowid, public_key, display_name, capabilities, visibility, status, last_active_at FROM agents',
    )
    .all()
  const expectedTags: string[] = []
  const counts = new Map<string, number>()
  const expectedFts: string[] = []
  for (const a of agents) {
    const caps = JSON.parse(a.capabilities) as { name: string; description?: string; tags?: string[] }[]
    const listed = a.visibility === 'public' && a.status === 'active' ? 1 : 0
    const tags = new Set(caps.flatMap((c) => c.tags ?? []).map((x) => x.toLowerCase()))
    for (const tag of tags) {
      expectedTags.push(`${a.public_key} ${tag} ${listed} ${a.last_active_at}`)
      if (listed) counts.set(tag, (counts.get(tag) ?? 0) + 1)
    }
    expectedFts.push(`${a.rowid}|${a.display_name ?? ''}|${caps.map((c) => `${c.name} ${c.description ?? ''}`).join(' ')}`)
  }
  const actualTags = db
    .query<{ r: string }, []>(`SELECT public_key || ' ' || tag || ' ' || listed || ' ' || last_active_at AS r FROM agent_tags`)
    .all()
    .map((x) => x.r)
  expect(actualTags.sort()).toEqual(expectedTags.sort())
  const actualCounts = db.query<{ tag: string; agent_count: number }, []>('SELECT tag, agent_count FROM tag_counts ORDER BY tag').all()
  expect(actualCounts).toEqual([...counts].sort(([a], [b]) => (a < b ? -1 : 1)).map(([tag, agent_count]) => ({ tag, agent_count })))
  const actualFts = db
    .query<{ r: string }, []>(`SELECT rowid || '|' || display_name || '|' || capability_text AS r FROM agents_fts`)
    .all()
    .map((x) => x.r)
  expect(actualFts.sort()).toEqual(expectedFts.sort())
  expect(db.query('PRAGMA integrity_check').get()).toEqual({ integrity_check: 'ok' })
  db.run(`INSERT INTO agents_fts(agents_fts) VALUES ('integrity-check')`)
}

describe('trigger-maintained indexes', () => {
  test('stay equal to the agents table through 600 random changes', async () => {
    const { agents: service } = t.relay.services
    const repo = t.relay.storage.agents
    const keys: string[] = []
    for (let step = 0; step < 600; step++) {
      t.clock.advance(Math.floor(random() * 3))
      const now = t.clock.now()
      const r = random()
      const statuses = new Map<string, string | undefined>()
      for (const k of keys) statuses.set(k, (await repo.find(k))?.status)
      const live = keys.filter((k) => statuses.get(k) === 'active')
      if (r < 0.2 || live.length === 0) {
        const key = randomBytes(32).toString('base64url')
        await repo.create(key, now)
        keys.push(key)
      } else if (r < 0.55) {
        const key = pick(live)
        const body: Record<string, unknown> = {}
        if (random() < 0.6) body.capabilities = randomCapabilities()
        if (random() < 0.4) body.visibility = pick(['public', 'private'])
        if (random() < 0.3) body.display_name = random() < 0.2 ? null : `${pick(WORDS)} ${step}`
        await service.patch(key, key, body)
      } else if (r < 0.75) {
        await repo.touch(pick(live), now)
      } else if (r < 0.83) {
        await service.suspend(random() < 0.9 ? pick(live) : randomBytes(32).toString('base64url'), 'test')
      } else if (r < 0.9) {
        const suspended = keys.filter((k) => statuses.get(k) === 'suspended')
        if (suspended.length) await service.unsuspend(pick(suspended))
      } else {
        const key = pick(live)
        await service.delete(key, key)
      }
      if (step % 100 === 99) checkIndexes(t.relay.sqlite!)
    }
    checkIndexes(t.relay.sqlite!)
    expect(t.relay.sqlite!.query<{ n: number }, []>('SELECT count(*) AS n FROM tag_counts').get()!.n).toBeGreaterThan(0)
  })

  test('VACUUM keeps agents_fts aligned with agents (rowids survive)', () => {
    const db = t.relay.sqlite!
    db.run('VACUUM')
    checkIndexes(db)
  })
})

describe('upgrading a database from before the listing columns', () => {
  test('0002 and 0003 fill listed, last_active_at, tag_counts and rebuild the text index', () => {
    const dir = tempDir()
    const db = new Database(join(dir, 'old.db'), { create: true, strict: true })
    db.run('PRAGMA foreign_keys = ON')
    db.run('CREATE TABLE __drizzle_migrations (id INTEGER PRIMARY KEY AUTOINCREMENT, hash text NOT NULL, created_at numeric)')
    for (const entry of MIGRATION_JOURNAL.entries.filter((e: { tag: string }) => e.tag < '0002')) {
      for (const stmt of MIGRATION_SQL[entry.tag].split('--> statement-breakpoint')) if (stmt.trim()) db.run(stmt)
      db.run('INSERT INTO __drizzle_migrations (hash, created_at) VALUES (?, ?)', ['old', entry.when])
    }
    const insert = db.prepare(
      `INSERT INTO agents (public_key, display_name, status, visibility, capabilities, created_at, updated_at, last_active_at) VALUES (?, ?, ?, ?, ?, 1, 1, ?)`,
    )
    insert.run('A'.repeat(43), 'Old Translator', 'active', 'public', JSON.stringify([{ name: 'translate', tags: ['nlp', 'text'] }]), 100)
    insert.run('B'.repeat(43), null, 'active', 'private', JSON.stringify([{ name: 'x', tags: ['nlp'] }]), 200)
    insert.run('C'.repeat(43), 'Bad', 'suspended', 'public', JSON.stringify([{ name: 'y', tags: ['nlp'] }]), 300)
    insert.run('D'.repeat(43), 'Coder', 'active', 'public', JSON.stringify([{ name: 'code', description: 'writes code', tags: ['nlp', 'code'] }]), 400)
    expect(migrate(db)).toBe(MIGRATION_JOURNAL.entries.length - 2)
    checkIndexes(db)
    expect(db.query('SELECT tag, agent_count FROM tag_counts ORDER BY agent_count DESC, tag').all()).toEqual([
      { tag: 'nlp', agent_count: 2 },
      { tag: 'code', agent_count: 1 },
      { tag: 'text', agent_count: 1 },
    ])
    expect(db.query(`SELECT rowid FROM agents_fts WHERE agents_fts MATCH '"transl"*'`).all()).toEqual([{ rowid: 1 }])
    db.close()
    rmSync(dir, { recursive: true, force: true })
  })
})
