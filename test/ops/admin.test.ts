/** `relay admin stats` and `relay admin agents`: figures from the database, human and JSON output. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { spawnSync } from 'bun'
import { StatsRepo } from '../../src/storage/sqlite/stats-repo.ts'
import { startTestRelay, type TestRelay } from '../support/harness.ts'
import { buildBinary } from '../support/binary.ts'

let t: TestRelay
let bin: string
const now = Date.now()
beforeAll(async () => {
  bin = await buildBinary()
  t = await startTestRelay({}, {})
  t.clock.set(now)
  for (let i = 0; i < 5; i++) await t.client().updateProfile({ display_name: `agent ${i}` })
  const c = t.relay.sqlite!
  const msg = (id: string, status: string, expiresAt: number) =>
    c.run(`INSERT INTO messages (message_id, sender_key, recipient_key, content_type, status, created_at, expires_at) VALUES (?, 'a', 'b', 'text/plain', ?, ?, ?)`, [id, status, now - 1000, expiresAt])
  msg('m1', 'sent', now + 60_000)
  msg('m2', 'sent', now - 1) // past expiry, not yet swept: counts as expired
  msg('m3', 'delivered', now + 60_000)
  msg('m4', 'delivered', now - 1) // gone
  msg('m5', 'expired', now - 1)
  const blob = (id: string, hash: string, size: number, expiresAt: number) =>
    c.run(`INSERT INTO blobs (blob_id, owner_key, hash, size_bytes, content_type, created_at, expires_at) VALUES (?, 'a', ?, ?, 'x/y', ?, ?)`, [id, hash, size, now, expiresAt])
  blob('b1', 'h1', 100, now + 1000)
  blob('b2', 'h1', 100, now + 1000) // same content, second owner record
  blob('b3', 'h2', 50, now - 1) // expired record, file not yet collected
  const hook = (key: string, enabled: number) =>
    c.run(`INSERT INTO webhooks (public_key, url, secret, enabled, created_at, updated_at) VALUES (?, 'https://x', 's', ?, ?, ?)`, [key, enabled, now, now])
  hook('k1', 1)
  hook('k2', 0)
  c.run(`INSERT INTO webhook_deliveries (delivery_id, public_key, message_id, state, next_attempt_at, created_at, updated_at) VALUES ('d1', 'k1', 'm1', 'pending', ?, ?, ?)`, [now, now, now])
  c.run(`INSERT INTO agents (public_key, status, suspended_reason, created_at, updated_at, last_active_at) VALUES ('S', 'suspended', 'spam to many agents', ?, ?, ?)`, [now + 1, now, now])
})
afterAll(() => t.close())

describe('stats', () => {
  test('counts by effective status', () => {
    const s = new StatsRepo(t.relay.sqlite!, t.relay.paths.database).all(now)
    expect(s.agents).toEqual({ active: 5, suspended: 1, total: 6 })
    expect(s.messages).toEqual({ sent: 1, delivered: 1, expired: 2, total: 4 })
    expect(s.blobs).toEqual({ records: 2, bytes: 200, stored_files: 2, stored_bytes: 150 })
    expect(s.webhooks).toEqual({ enabled: 1, disabled: 1, pending_deliveries: 1 })
    expect(s.database.size_bytes).toBeGreaterThan(0)
  })

  test('relay admin stats, human and --json, while the relay has the database open', () => {
    const json = spawnSync([bin, 'admin', 'stats', '--json', '--data-dir', t.dataDir])
    expect(json.exitCode).toBe(0)
    const s = JSON.parse(json.stdout.toString())
    expect(s.data_dir).toBe(t.dataDir)
    expect(s.agents.total).toBe(6)
    expect(s.messages.sent).toBe(1)
    const human = spawnSync([bin, 'admin', 'stats', '--data-dir', t.dataDir]).stdout.toString()
    expect(human).toContain('agents    5 active, 1 suspended (6 total)')
    expect(human).toContain('messages  1 sent, 1 delivered, 2 expired (4 total)')
    expect(human).toContain('webhooks  1 enabled, 1 disabled; 1 deliveries pending')
    expect(human).toMatch(/database  \d+(\.\d)? KiB/)
  })
})

describe('agents list', () => {
  test('pages through every agent in creation order', () => {
    const seen: string[] = []
    let cursor: string | null = null
    let pages = 0
    do {
      const args: string[] = [bin, 'admin', 'agents', '--json', '--limit', '2', '--data-dir', t.dataDir, ...(cursor ? ['--cursor', cursor] : [])]
      const r = spawnSync(args)
      expect(r.exitCode).toBe(0)
      const page = JSON.parse(r.stdout.toString())
      expect(page.next_cursor === null).toBe(!page.has_more)
      seen.push(...page.agents.map((a: any) => a.public_key))
      cursor = page.next_cursor
      pages++
    } while (cursor)
    expect(pages).toBe(3)
    expect(new Set(seen).size).toBe(6)
    expect(seen[5]).toBe('S')
  })

  test('filters by status; the table shows status and names', () => {
    const r = spawnSync([bin, 'admin', 'agents', '--status', 'suspended', '--json', '--data-dir', t.dataDir])
    expect(JSON.parse(r.stdout.toString()).agents.map((a: any) => [a.public_key, a.status])).toEqual([['S', 'suspended']])
    const table = spawnSync([bin, 'admin', 'agents', '--limit', '5', '--data-dir', t.dataDir]).stdout.toString().split('\n')
    expect(table[0]).toMatch(/^PUBLIC KEY\s+STATUS\s+NAME/)
    expect(table[1]).toContain('active')
    expect(table[1]).toContain('agent ')
    expect(table[6]).toMatch(/^more: relay admin agents --cursor \S+ --limit 5$/)
    // the suspension reason is a column of the table, as it is a field of --json
    const suspended = spawnSync([bin, 'admin', 'agents', '--status', 'suspended', '--data-dir', t.dataDir]).stdout.toString().split('\n')
    expect(suspended[0]).toMatch(/\s+LAST ACTIVE\s+SUSPENSION REASON$/)
    expect(suspended[1]).toMatch(/^S\s+suspended\s.*\sspam to many agents$/)
    expect(table[1]).toMatch(/\s-$/)
  })

  test('bad flags are usage errors', () => {
    expect(spawnSync([bin, 'admin', 'agents', '--status', 'gone', '--data-dir', t.dataDir]).exitCode).toBe(2)
    expect(spawnSync([bin, 'admin', 'agents', '--cursor', 'nope', '--data-dir', t.dataDir]).exitCode).toBe(2)
    expect(spawnSync([bin, 'admin', 'frobnicate', '--data-dir', t.dataDir]).exitCode).toBe(2)
  })
})
