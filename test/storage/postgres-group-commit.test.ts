/**
 * Cluster mode, grouped writes: units of work that accept messages (`transaction(fn, { grouped: true })`)
 * queued in one turn share one PostgreSQL transaction, each answered only after its commit; a failing
 * unit fails alone; the messages committed in one turn are announced to the other instances in one
 * notice, which they decode into every message. Replay reservations of one turn share one statement,
 * and a rate hit counts several events at once.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { SQL } from 'bun'
import { RelayError } from '../../src/errors.ts'
import { silentLogger } from '../../src/lib/logger.ts'
import { FakeClock } from '../../src/lib/clock.ts'
import type { MessageRecord } from '../../src/services/models/records.ts'
import type { OpenedStorage } from '../../src/storage/open-storage.ts'
import { openPostgres } from '../../src/storage/postgres/open-postgres.ts'
import { SIGNAL_CHANNEL } from '../../src/storage/postgres/signals.ts'
import { postgresRunner, sharedPostgres, type TestPostgres } from '../support/postgres.ts'

const T0 = 1_795_000_000_000
const key = (head: string) => head + 'x'.repeat(43 - head.length)
const bin = postgresRunner('PostgreSQL group commit tests')

async function eventually(check: () => boolean | Promise<boolean>, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not reached in time')
    await Bun.sleep(20)
  }
}

const message = (id: string, recipient = key('R')): MessageRecord => ({
  messageId: id, senderKey: key('S'), recipientKey: recipient, contentType: 'application/json', body: '{"n":1}',
  attachments: null, threadId: null, inReplyTo: null, metadata: null, status: 'sent', createdAt: T0, expiresAt: T0 + 60_000, deliveredAt: null,
})

describe.skipIf(bin === null)('PostgreSQL: grouped units of work', () => {
  let pg: TestPostgres
  let url: string
  let a: OpenedStorage
  let b: OpenedStorage
  /** A connection of its own: sees only what was committed. */
  let outside: SQL
  const clock = new FakeClock(T0)

  beforeAll(async () => {
    pg = await sharedPostgres(bin as string)
    url = await pg.createDatabase('group_commit')
    a = await openPostgres(url, { logger: silentLogger, clock, lockWaitMs: 1000, heartbeatMs: 60_000 })
    b = await openPostgres(url, { logger: silentLogger, clock, lockWaitMs: 1000, heartbeatMs: 60_000 })
    outside = new SQL({ url, max: 1 })
  }, 30_000)

  afterAll(async () => {
    await outside?.close()
    await a?.storage.close()
    await b?.storage.close()
  })

  const stored = async (ids: string[]) =>
    ((await outside.unsafe('SELECT message_id FROM messages WHERE message_id = ANY($1::text[]) ORDER BY message_id', [ids])) as { message_id: string }[]).map((r) => r.message_id)
  const groupStats = async (s: OpenedStorage) => (await s.storage.health()).grouped as { groups: number; units: number; reruns: number }

  test('units queued in one turn share one commit; each resolves only once its row is committed', async () => {
    const before = await groupStats(a)
    const ids = Array.from({ length: 60 }, (_, i) => `msg_group_ok_${String(i).padStart(2, '0')}`)
    const visibleAtResolve: boolean[] = []
    await Promise.all(
      ids.map((id) =>
        a.storage
          .transaction((tx) => tx.messages.insert(message(id), []), { grouped: true })
          .then(async (inserted) => {
            expect(inserted).toBe(true)
            visibleAtResolve.push((await stored([id])).length === 1)
          }),
      ),
    )
    expect(visibleAtResolve).toEqual(ids.map(() => true))
    expect(await stored(ids)).toEqual(ids)
    const after = await groupStats(a)
    expect(after.units - before.units).toBe(60)
    // queued in one turn: one group (a few at most were it split by size), not sixty transactions
    expect(after.groups - before.groups).toBeLessThanOrEqual(2)
    expect(after.reruns).toBe(before.reruns)
  })

  test('a unit that throws fails alone: the others of its group commit, its own rows are rolled back', async () => {
    const before = await groupStats(a)
    const ids = Array.from({ length: 20 }, (_, i) => `msg_group_mixed_${String(i).padStart(2, '0')}`)
    const outcomes = await Promise.allSettled(
      ids.map((id, i) =>
        a.storage.transaction(async (tx) => {
          await tx.messages.insert(message(id), [])
          if (i === 7) throw new RelayError('unprocessable_entity', 'refused after its insert')
          return id
        }, { grouped: true }),
      ),
    )
    expect(outcomes.map((o) => o.status)).toEqual(ids.map((_, i) => (i === 7 ? 'rejected' : 'fulfilled')))
    expect(((outcomes[7] as PromiseRejectedResult).reason as RelayError).code).toBe('unprocessable_entity')
    expect(await stored(ids)).toEqual(ids.filter((_, i) => i !== 7))
    expect((await groupStats(a)).reruns).toBeGreaterThan(before.reruns)
  })

  test('a unit whose statement fails (aborting the shared transaction) fails alone too', async () => {
    const ids = Array.from({ length: 12 }, (_, i) => `msg_group_sqlerr_${String(i).padStart(2, '0')}`)
    const outcomes = await Promise.allSettled(
      ids.map((id, i) =>
        a.storage.transaction(async (tx) => {
          // a status the table's check refuses: PostgreSQL aborts the transaction it runs in
          await tx.messages.insert(i === 3 ? { ...message(id), createdAt: Number.NaN } : message(id), [])
          return id
        }, { grouped: true }),
      ),
    )
    expect(outcomes.map((o) => o.status)).toEqual(ids.map((_, i) => (i === 3 ? 'rejected' : 'fulfilled')))
    expect(await stored(ids)).toEqual(ids.filter((_, i) => i !== 3))
  })

  test('a group whose connection is killed before its commit runs again on another: every unit resolves, every one stored', async () => {
    const ids = Array.from({ length: 20 }, (_, i) => `msg_group_killed_${String(i).padStart(2, '0')}`)
    const runs = new Map<string, number>()
    const outcomes = Promise.allSettled(
      ids.map((id) =>
        a.storage.transaction(async (tx) => {
          runs.set(id, (runs.get(id) ?? 0) + 1)
          await tx.messages.insert(message(id), [])
          await Bun.sleep(150) // the transaction stays open, idle, meanwhile
          await tx.messages.find(id)
          return id
        }, { grouped: true }),
      ),
    )
    await Bun.sleep(60)
    const killed = (await outside.unsafe(
      `SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity
       WHERE datname = current_database() AND application_name = 'relay' AND state LIKE 'idle in transaction%'`,
    )) as { ok: boolean }[]
    expect(killed.length).toBeGreaterThan(0)
    const settled = await outcomes
    expect(settled.map((o) => o.status)).toEqual(ids.map(() => 'fulfilled'))
    expect(await stored(ids)).toEqual(ids)
    // the group ran again after the cut (all of it optimistically, or from the unit cut off when careful)
    expect(Math.max(...runs.values())).toBeGreaterThanOrEqual(2)
  })

  test('the messages of one group reach the other instance, every one, through one notice', async () => {
    const notices: string[] = []
    const listener = new SQL({ url, max: 1 })
    await listener.listen(SIGNAL_CHANNEL, (payload) => notices.push(payload))
    const remote: string[] = []
    b.signals.onMessage((m, origin) => origin === 'remote' && m.messageId.startsWith('msg_group_push_') && remote.push(m.messageId))
    try {
      const ids = Array.from({ length: 40 }, (_, i) => `msg_group_push_${String(i).padStart(2, '0')}`)
      await Promise.all(
        ids.map(async (id) => {
          const m = message(id, key(`P${id.slice(-2)}`))
          await a.storage.transaction((tx) => tx.messages.insert(m, []), { grouped: true })
          a.signals.messageCommitted(m)
        }),
      )
      await eventually(() => remote.length === ids.length)
      expect([...remote].sort()).toEqual(ids)
      const ours = notices.map((n) => JSON.parse(n) as { t: string; m?: [string, string][] }).filter((n) => n.t === 'n' && n.m?.some(([id]) => id.startsWith('msg_group_push_')))
      expect(ours.length).toBe(1)
      expect(ours[0].m?.map(([id]) => id).sort()).toEqual(ids)
      await Bun.sleep(100)
      expect(remote.length).toBe(ids.length) // each once
    } finally {
      await listener.close()
    }
  })

  test('a notice too large for one NOTIFY is split; every message still arrives', async () => {
    const remote = new Set<string>()
    b.signals.onMessage((m, origin) => origin === 'remote' && m.messageId.startsWith('msg_group_big_') && remote.add(m.messageId))
    const ids = Array.from({ length: 300 }, (_, i) => `msg_group_big_${String(i).padStart(3, '0')}`)
    await Promise.all(
      ids.map(async (id) => {
        const m = message(id, key(`Q${id.slice(-3)}`))
        await a.storage.transaction((tx) => tx.messages.insert(m, []), { grouped: true })
        a.signals.messageCommitted(m)
      }),
    )
    await eventually(() => remote.size === ids.length)
  })

  test('replay reservations of one turn share a statement; of one signature reserved twice at once, one wins', async () => {
    const sigs = Array.from({ length: 30 }, (_, i) => `sig_group_${i}`)
    const expiry = T0 + 120_000
    const results = await Promise.all([
      ...sigs.map((s) => a.storage.replay.reserve(s, expiry)),
      a.storage.replay.reserve('sig_group_dup', expiry),
      a.storage.replay.reserve('sig_group_dup', expiry),
      b.storage.replay.reserve('sig_group_dup', expiry),
    ])
    expect(results.slice(0, 30).every((r) => r !== null)).toBe(true)
    expect(results.slice(30).filter((r) => r !== null).length).toBe(1)
    expect(await a.storage.replay.reserve('sig_group_3', expiry)).toBeNull()
    const [row] = await outside.unsafe(`SELECT count(*)::int AS n FROM replay_log WHERE signature LIKE 'sig_group_%'`)
    expect(row.n).toBe(31)
  })

  test('rate hits of one turn on several buckets, from both instances: each bucket counts exactly its limit', async () => {
    const buckets = ['send:batch_a', 'send:batch_b', 'send:batch_c', "send:batch_'d'"]
    const hits = await Promise.all(
      Array.from({ length: 80 }, (_, i) => (i % 2 ? a : b).storage.rates.hit(buckets[i % 4], 15, 60_000, T0 + 5_000 + i)),
    )
    for (let k = 0; k < 4; k++) {
      const mine = hits.filter((_, i) => i % 4 === k)
      expect(mine.filter((h) => h.allowed).length).toBe(15)
      // every allowed hit saw a different count: none was counted twice or lost
      expect(new Set(mine.filter((h) => h.allowed).map((h) => h.count)).size).toBe(15)
      expect((await a.storage.rates.peek(buckets[k], 60_000, T0 + 5_100)).count).toBe(15)
    }
  })

  test('a rate hit counts several events at once, all or none, and bucket names are taken literally', async () => {
    const bucket = "poll:it's \\ odd\u0000"
    expect(await a.storage.rates.hit(bucket, 10, 60_000, T0, 4)).toEqual({ allowed: true, count: 4, oldestAt: T0 })
    expect(await b.storage.rates.hit(bucket, 10, 60_000, T0 + 1, 6)).toEqual({ allowed: true, count: 10, oldestAt: T0 })
    expect(await a.storage.rates.hit(bucket, 10, 60_000, T0 + 2, 1)).toEqual({ allowed: false, count: 10, oldestAt: T0 })
    expect(await a.storage.rates.peek(bucket, 60_000, T0 + 2)).toEqual({ count: 10, oldestAt: T0 })
    expect(await a.storage.rates.peek("poll:it's", 60_000, T0 + 2)).toEqual({ count: 0, oldestAt: T0 + 2 })
  })
})
