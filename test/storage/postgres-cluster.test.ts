/**
 * Cluster mode: two storages opened on one PostgreSQL database behave as two relay instances. Messages
 * and agent removals announced on one reach the other, and what must be counted once (replays, rates,
 * open WebSockets, job runs, webhook claims) is counted once across both.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { SQL } from 'bun'
import { silentLogger } from '../../src/lib/logger.ts'
import { FakeClock } from '../../src/lib/clock.ts'
import type { MessageRecord } from '../../src/services/models/records.ts'
import type { OpenedStorage } from '../../src/storage/open-storage.ts'
import { MIGRATION_JOURNAL } from '../../src/storage/postgres/embedded-migrations.ts'
import { openPostgres } from '../../src/storage/postgres/open-postgres.ts'
import { replayEntryExpiry } from '../../src/services/authenticator.ts'
import { postgresRunner, sharedPostgres, type TestPostgres } from '../support/postgres.ts'

const T0 = 1_795_000_000_000
const key = (head: string) => head + 'x'.repeat(43 - head.length)
const bin = postgresRunner('PostgreSQL cluster tests')

/** Polls `check` until it holds (notices travel asynchronously); fails after `ms`. */
async function eventually(check: () => boolean | Promise<boolean>, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not reached in time')
    await Bun.sleep(20)
  }
}

describe.skipIf(bin === null)('PostgreSQL cluster: two instances on one database', () => {
  let pg: TestPostgres
  let url: string
  let a: OpenedStorage
  let b: OpenedStorage
  const clock = new FakeClock(T0)

  beforeAll(async () => {
    pg = await sharedPostgres(bin as string)
    url = await pg.createDatabase('cluster')
    // started together: the migrations run once, under the advisory lock
    ;[a, b] = await Promise.all([
      openPostgres(url, { logger: silentLogger, clock, lockWaitMs: 1000, heartbeatMs: 60_000 }),
      openPostgres(url, { logger: silentLogger, clock, lockWaitMs: 1000, heartbeatMs: 60_000 }),
    ])
   }, 30_000)

  afterAll(async () => {
    await a?.storage.close()
    await b?.storage.close()
  })

  test('the migrations were applied once', async () => {
    const sql = new SQL({ url, max: 1 })
    try {
      const [row] = await sql.unsafe('SELECT count(*)::int AS n FROM drizzle.__drizzle_migrations')
      expect(row.n).toBe(MIGRATION_JOURNAL.entries.length)
    } finally {
      await sql.close()
    }
  })

  test('a message committed via A reaches A as local and B as remote, read from the database', async () => {
    const seenA: [string, string][] = []
    const seenB: [string, string][] = []
    a.signals.onMessage((m, origin) => seenA.push([m.messageId, origin]))
    b.signals.onMessage((m, origin) => seenB.push([m.messageId, origin]))
    const m: MessageRecord = {
      messageId: 'msg_cluster_1', senderKey: key('S'), recipientKey: key('R'), contentType: 'application/json', body: '{"x":1.0}',
      attachments: null, threadId: null, inReplyTo: null, metadata: null, status: 'sent', createdAt: T0, expiresAt: T0 + 60_000, deliveredAt: null,
    }
    await a.storage.messages.insert(m, [])
    a.signals.messageCommitted(m)
    expect(seenA).toEqual([['msg_cluster_1', 'local']])
    const received: MessageRecord[] = []
    b.signals.onMessage((msg) => received.push(msg))
    await eventually(() => seenB.length > 0)
    expect(seenB).toEqual([['msg_cluster_1', 'remote']])
    expect(received).toEqual([m])
    await Bun.sleep(100)
    expect(seenA).toEqual([['msg_cluster_1', 'local']]) // A skips its own notice
  })

  test('an instance reads only messages for recipients it wants (its sockets)', async () => {
    const seen: string[] = []
    b.signals.onMessage((msg, origin) => origin === 'remote' && seen.push(msg.messageId))
    b.signals.wantRecipients((recipient) => recipient === key('Wanted'))
    try {
      const base: MessageRecord = {
        messageId: '', senderKey: key('S'), recipientKey: '', contentType: 'application/json', body: '{}',
        attachments: null, threadId: null, inReplyTo: null, metadata: null, status: 'sent', createdAt: T0, expiresAt: T0 + 60_000, deliveredAt: null,
      }
      const other = { ...base, messageId: 'msg_cluster_unwanted', recipientKey: key('Elsewhere') }
      const wanted = { ...base, messageId: 'msg_cluster_wanted', recipientKey: key('Wanted') }
      for (const m of [other, wanted]) {
        await a.storage.messages.insert(m, [])
        a.signals.messageCommitted(m)
      }
      await eventually(() => seen.includes('msg_cluster_wanted'))
      await Bun.sleep(100)
      expect(seen.filter((id) => id.startsWith('msg_cluster_') && id !== 'msg_cluster_1')).toEqual(['msg_cluster_wanted'])
    } finally {
      b.signals.wantRecipients(() => true)
    }
  })

  test('an agent gone on B is gone on A', async () => {
    const gone: string[] = []
    a.signals.onAgentGone((k, reason) => gone.push(`${k}:${reason}`))
    b.signals.agentGone(key('Gone'), 'suspended')
    await eventually(() => gone.length > 0)
    expect(gone).toEqual([`${key('Gone')}:suspended`])
    // A finds the same suspension in its change scan and announces it too: B is not told again
    const heardOnB: string[] = []
    b.signals.onAgentGone((k) => heardOnB.push(k))
    a.signals.agentGone(key('Gone'), 'suspended')
    // and another removal of the same agent still travels
    a.signals.agentGone(key('Gone'), 'deleted')
    await eventually(() => heardOnB.length > 0)
    await Bun.sleep(100)
    expect(heardOnB).toEqual([key('Gone')])
  })

  test('a replay on B of a signature accepted on A is refused', async () => {
    const first = await a.storage.replay.reserve('sig_cluster_0000000000', T0 + 1000)
    expect(first).not.toBeNull()
    await first?.durable
    expect(await b.storage.replay.reserve('sig_cluster_0000000000', T0 + 1000)).toBeNull()
    // at once, from both sides
    const both = await Promise.all([a.storage.replay.reserve('sig_cluster_1111111111', T0 + 1000), b.storage.replay.reserve('sig_cluster_1111111111', T0 + 1000)])
    expect(both.filter((r) => r !== null).length).toBe(1)
  })

  test('clocks 8 s apart: an entry pruned by the instance ahead still refuses the replay on the one behind', async () => {
    const tolerance = 10_000
    // A's clock is 8 s ahead of B's; a client ahead too signs at A's now + tolerance, and A accepts it
    const aNow = T0 + 100_000
    const signedAt = aNow + tolerance
    expect(await a.storage.replay.reserve('sig_skewed_0000000000', replayEntryExpiry(aNow, tolerance))).not.toBeNull()
    // the window is over by A's clock, and A prunes
    await a.storage.replay.prune(aNow + 2 * tolerance + 1, 1000)
    // B, 8 s behind, still finds the timestamp inside its window: the replay must be refused there
    const bNow = aNow + 2 * tolerance + 1 - 8_000
    expect(Math.abs(signedAt - bNow)).toBeLessThanOrEqual(tolerance)
    expect(await b.storage.replay.reserve('sig_skewed_0000000000', replayEntryExpiry(bNow, tolerance))).toBeNull()
    // once the margin has passed for every clock, the entry goes
    expect(await a.storage.replay.prune(aNow + 2 * tolerance + 61_000, 1000)).toBeGreaterThanOrEqual(1)
  })

  test('rate limits are counted once across instances', async () => {
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) => (i % 2 ? a : b).storage.rates.hit('send:shared', 30, 60_000, T0 + i)),
    )
    expect(results.filter((r) => r.allowed).length).toBe(30)
    expect((await a.storage.rates.peek('send:shared', 60_000, T0 + 100)).count).toBe(30)
    expect((await b.storage.rates.hit('send:shared', 30, 60_000, T0 + 100)).allowed).toBe(false)
  })

  /** Two more instances beating every 100 ms (rows lapse after 300 ms), past their first three beats. */
  async function beating(): Promise<[OpenedStorage, OpenedStorage]> {
    const pair = await Promise.all([
      openPostgres(url, { logger: silentLogger, clock, lockWaitMs: 1000, heartbeatMs: 100 }),
      openPostgres(url, { logger: silentLogger, clock, lockWaitMs: 1000, heartbeatMs: 100 }),
    ])
    // an instance judges lapsed heartbeats once it has reached the database for three intervals
    await Bun.sleep(350)
    return pair
  }

  test('open WebSockets are counted across instances; a dead instance stops counting after its heartbeat lapses', async () => {
    const [x, y] = await beating()
    try {
      const k = key('Ws')
      const now = clock.now()
      expect(await x.connections.tryAdd(k, 'c1', 2, now)).toBe(true)
      expect(await y.connections.tryAdd(k, 'c2', 2, now)).toBe(true)
      expect(await y.connections.tryAdd(k, 'c3', 2, now)).toBe(false)
      expect(await x.connections.tryAdd(k, 'c3', 2, now)).toBe(false)
      await y.connections.remove(k, 'c2')
      expect(await x.connections.tryAdd(k, 'c3', 2, now)).toBe(true)
      // X stops beating (its link stays): three intervals later its connections no longer count
      await (x.connections as unknown as { close(o: { forget: boolean }): Promise<void> }).close({ forget: false })
      expect(await y.connections.tryAdd(k, 'c4', 2, now)).toBe(false)
      await Bun.sleep(450)
      expect(await y.connections.tryAdd(k, 'c4', 2, now)).toBe(true)
      expect(await y.connections.tryAdd(k, 'c5', 2, now)).toBe(true)
      expect(await y.connections.tryAdd(k, 'c6', 2, now)).toBe(false)
      // while an instance that beats keeps its connections counted, however long
      await Bun.sleep(500)
      expect(await x.connections.tryAdd(k, 'c7', 2, now)).toBe(false)
    } finally {
      await x.storage.close()
      await y.storage.close()
    }
  })

  test('an instance gone at once (kill -9): its connections stop counting when its link leaves the server, not 15 s later', async () => {
    // heartbeats every 60 s: rows lapse after 3 minutes, so only the link can free the slots here (and the
    // server, started moments ago, is not given the grace of a restart)
    const [judge, c] = await Promise.all([
      openPostgres(url, { logger: silentLogger, clock, lockWaitMs: 1000, heartbeatMs: 60_000, linkGraceMs: 0 }),
      openPostgres(url, { logger: silentLogger, clock, lockWaitMs: 1000, heartbeatMs: 60_000, linkGraceMs: 0 }),
    ])
    const k = key('Killed')
    const now = clock.now()
    try {
      expect(await c.connections.tryAdd(k, 'x1', 2, now)).toBe(true)
      expect(await c.connections.tryAdd(k, 'x2', 2, now)).toBe(true)
      expect(await judge.connections.tryAdd(k, 'y1', 2, now)).toBe(false)
      // the process dies: its rows stay, with a fresh heartbeat, but its connections are gone from the server
      await c.signals.close()
      await (c.connections as unknown as { close(o: { forget: boolean }): Promise<void> }).close({ forget: false })
      await eventually(async () => await judge.connections.tryAdd(k, 'y1', 2, now), 5000)
      expect(await judge.connections.tryAdd(k, 'y2', 2, now)).toBe(true)
      expect(await judge.connections.tryAdd(k, 'y3', 2, now)).toBe(false)
    } finally {
      await c.storage.close()
      await judge.storage.close()
    }
  })

  test('an instance cut off longer than three heartbeats: its connections, cleared by the others, are counted again', async () => {
    const [p, q] = await beating()
    const k = key('Cutoff')
    const now = clock.now()
    try {
      expect(await p.connections.tryAdd(k, 'z1', 2, now)).toBe(true)
      expect(await p.connections.tryAdd(k, 'z2', 2, now)).toBe(true)
      // P cannot beat for a while (its timer stops; it still holds its sockets): its rows look a second
      // old, and Q clears them as a dead instance's
      clearInterval((p.connections as unknown as { timer: ReturnType<typeof setInterval> }).timer)
      const sql = new SQL({ url, max: 1 })
      try {
        await sql.unsafe('UPDATE ws_connections SET heartbeat_at = heartbeat_at - 1000 WHERE public_key = $1', [k])
        await q.connections.heartbeat(0)
        expect((await sql.unsafe('SELECT count(*)::int AS n FROM ws_connections WHERE public_key = $1', [k]))[0].n).toBe(0)
      } finally {
        await sql.close()
      }
      // P reaches the database again: its heartbeat writes back the connections it still holds
      await p.connections.heartbeat(0)
      expect(await q.connections.tryAdd(k, 'z3', 2, now)).toBe(false)
      await p.connections.remove(k, 'z1')
      expect(await q.connections.tryAdd(k, 'z3', 2, now)).toBe(true)
    } finally {
      await p.storage.close()
      await q.storage.close()
    }
  })

  test('connection ids are per instance: the same id on two instances is two connections', async () => {
    const k = key('Wid')
    const now = clock.now()
    expect(await a.connections.tryAdd(k, '1', 2, now)).toBe(true)
    expect(await b.connections.tryAdd(k, '1', 2, now)).toBe(true)
    expect(await a.connections.tryAdd(k, '2', 2, now)).toBe(false)
    await a.connections.remove(k, '1')
    expect(await b.connections.tryAdd(k, '2', 2, now)).toBe(true)
    expect(await a.connections.tryAdd(k, '3', 2, now)).toBe(false)
  })

  test('concurrent adds on both instances never pass the limit', async () => {
    const k = key('Race')
    const tries = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? a : b).connections.tryAdd(k, `r${i}`, 3, clock.now())))
    expect(tries.filter(Boolean).length).toBe(3)
  })

  test('a job runs on one instance at a time', async () => {
    let release!: () => void
    const gate = new Promise<void>((r) => (release = r))
    const onA = a.storage.exclusive('sweep', async () => {
      await gate
      return 'a'
    })
    await Bun.sleep(50)
    expect(await b.storage.exclusive('sweep', async () => 'b')).toEqual({ ran: false })
    release()
    expect(await onA).toEqual({ ran: true, value: 'a' })
    expect(await b.storage.exclusive('sweep', async () => 'b')).toEqual({ ran: true, value: 'b' })
  })

  test('webhook claims of both instances are disjoint', async () => {
    const hook = key('Hook')
    await a.storage.webhooks.upsert(hook, 'https://h.example', 's', T0)
    for (let i = 0; i < 40; i++) await a.storage.webhooks.enqueue(`cd${i}`, hook, `cm${i}`, T0 + i)
    const [fromA, fromB] = await Promise.all([
      a.storage.webhooks.claimDue(T0 + 100, [], 30, T0 + 10_000),
      b.storage.webhooks.claimDue(T0 + 100, [], 30, T0 + 10_000),
    ])
    const ids = [...fromA, ...fromB].map((d) => d.deliveryId)
    expect(new Set(ids).size).toBe(ids.length)
    expect(ids.length).toBe(40)
  })

  test("an operator change on B reaches A's cached record through changedSince", async () => {
    const k = key('Cached')
    await a.storage.agents.create(k, T0)
    expect((await a.storage.agents.find(k))?.status).toBe('active') // cached on A now
    await b.storage.agents.suspend(k, 'abuse', T0 + 5)
    const changes = await a.storage.agents.changedSince(T0)
    expect(changes).toContainEqual({ publicKey: k, status: 'suspended', updatedAt: T0 + 5 })
    for (const c of changes) a.storage.agents.invalidate(c.publicKey)
    expect((await a.storage.agents.find(k))?.status).toBe('suspended')
  })

  test('when the signal link drops, it comes back and the resync listeners run', async () => {
    let resyncs = 0
    b.signals.onResync(() => resyncs++)
    const admin = new SQL({ url: pg.url, max: 1 })
    try {
      const db = new URL(url).pathname.slice(1)
      await admin.unsafe(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND query ILIKE '%LISTEN%'`, [db])
    } finally {
      await admin.close()
    }
    await eventually(() => resyncs > 0, 10_000)
    // and notices flow again
    const seen: string[] = []
    b.signals.onAgentGone((k) => seen.push(k))
    a.signals.agentGone(key('After'), 'deleted')
    await eventually(() => seen.includes(key('After')), 5000)
  })
})
