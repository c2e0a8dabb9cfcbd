/**
 * The storage ports (src/services/ports.ts), run unchanged against every backend of backends.ts: the
 * embedded SQLite file and PostgreSQL. Each test opens a fresh, empty storage; times are plain numbers
 * passed in, as the services do.
 */
import { afterEach, beforeAll, describe, expect, test } from 'bun:test'
import { RelayError } from '../../src/errors.ts'
import { silentLogger } from '../../src/lib/logger.ts'
import { FakeClock } from '../../src/lib/clock.ts'
import type { DiscoveryFilter, MessageRecord } from '../../src/services/models/records.ts'
import type { Storage } from '../../src/services/ports.ts'
import { openPostgres } from '../../src/storage/postgres/open-postgres.ts'
import { postgresRunner, sharedPostgres, startPostgres } from '../support/postgres.ts'
import { BACKENDS, PREPARE_TIMEOUT_MS, type Opened } from './backends.ts'

const T0 = 1_795_000_000_000
const HOUR = 3_600_000

/** A 43-character key starting with `head` (mixed case on purpose: lists order keys byte by byte). */
const key = (head: string) => head + 'x'.repeat(43 - head.length)

let seq = 0
function message(fields: Partial<MessageRecord> = {}): MessageRecord {
  return {
    messageId: `msg_${String(++seq).padStart(8, '0')}`,
    senderKey: key('S'),
    recipientKey: key('R'),
    contentType: 'application/json',
    body: '{"n":1}',
    attachments: null,
    threadId: null,
    inReplyTo: null,
    metadata: null,
    status: 'sent',
    createdAt: T0,
    expiresAt: T0 + HOUR,
    deliveredAt: null,
    ...fields,
  }
}

const filter = (f: Partial<DiscoveryFilter> = {}): DiscoveryFilter => ({ tags: [], words: [], nameContains: null, activeSince: null, after: null, limit: 50, ...f })
const caps = (...list: { name: string; description?: string; tags?: string[] }[]) => JSON.stringify(list)

for (const backend of BACKENDS) {
  describe.skipIf(!backend.available)(`storage contract: ${backend.name}`, () => {
    beforeAll(() => backend.prepare(), PREPARE_TIMEOUT_MS)
    let opened: Opened | null = null
    const open = async (): Promise<Storage> => {
      opened = await backend.open()
      return opened.storage
    }
    afterEach(async () => {
      await opened?.close()
      opened = null
    })

    describe('agents', () => {
      test('create, find, count, update, touch, delete', async () => {
        const s = await open()
        const k = key('Agent1')
        expect(await s.agents.find(k)).toBeNull()
        const created = await s.agents.create(k, T0)
        expect(created).toEqual({
          publicKey: k, displayName: null, status: 'active', suspendedReason: null, visibility: 'private', inboxPolicy: 'blocklist',
          metadata: '{}', capabilities: '[]', createdAt: T0, updatedAt: T0, lastActiveAt: T0,
        })
        expect(await s.agents.create(k, T0 + 5)).toEqual(created)
        expect(await s.agents.count()).toBe(1)
        await s.agents.updateProfile(k, { displayName: 'Ünïcode "name"', metadata: '{"a": 1.50}', inboxPolicy: 'open' }, T0 + 10)
        const updated = await s.agents.find(k)
        expect(updated?.displayName).toBe('Ünïcode "name"')
        expect(updated?.metadata).toBe('{"a": 1.50}')
        expect(updated?.inboxPolicy).toBe('open')
        expect(updated?.updatedAt).toBe(T0 + 10)
        await s.agents.touch(k, T0 + 20)
        expect((await s.agents.find(k))?.lastActiveAt).toBe(T0 + 20)
        await s.agents.delete(k)
        expect(await s.agents.find(k)).toBeNull()
        expect(await s.agents.count()).toBe(0)
      })

      test('suspend creates a suspended record for an unknown key; unsuspend; changedSince oldest first', async () => {
        const s = await open()
        const a = key('A')
        const b = key('B')
        await s.agents.create(a, T0)
        await s.agents.suspend(b, 'spam', T0 + 1)
        expect(await s.agents.find(b)).toMatchObject({ status: 'suspended', suspendedReason: 'spam', createdAt: T0 + 1 })
        await s.agents.suspend(a, null, T0 + 2)
        expect(await s.agents.find(a)).toMatchObject({ status: 'suspended', suspendedReason: null, createdAt: T0, updatedAt: T0 + 2 })
        expect(await s.agents.unsuspend(key('Nobody'), T0 + 3)).toBe(false)
        expect(await s.agents.unsuspend(b, T0 + 4)).toBe(true)
        expect(await s.agents.find(b)).toMatchObject({ status: 'active', suspendedReason: null, updatedAt: T0 + 4 })
        expect(await s.agents.changedSince(T0)).toEqual([
          { publicKey: a, status: 'suspended', updatedAt: T0 + 2 },
          { publicKey: b, status: 'active', updatedAt: T0 + 4 },
        ])
        expect(await s.agents.changedSince(T0 + 4)).toEqual([])
      })

      test('a record read or created inside a transaction that rolled back is not kept by a cache', async () => {
        const s = await open()
        const k = key('Ghost')
        await s
          .transaction(async (tx) => {
            await tx.agents.create(k, T0)
            expect(await tx.agents.find(k)).not.toBeNull()
            throw new Error('roll back')
          })
          .catch(() => {})
        expect(await s.agents.find(k)).toBeNull()
        expect(await s.agents.count()).toBe(0)

        const real = key('Real')
        await s.agents.create(real, T0)
        expect((await s.agents.find(real))?.displayName).toBeNull()
        await s
          .transaction(async (tx) => {
            await tx.agents.updateProfile(real, { displayName: 'never' }, T0 + 1)
            expect((await tx.agents.find(real))?.displayName).toBe('never')
            throw new Error('roll back')
          })
          .catch(() => {})
        expect((await s.agents.find(real))?.displayName).toBeNull()
        // and a committed change is seen at once
        await s.transaction(async (tx) => tx.agents.updateProfile(real, { displayName: 'kept' }, T0 + 2))
        expect((await s.agents.find(real))?.displayName).toBe('kept')
      })
    })

    describe('messages', () => {
      test('insert refuses a taken id and writes nothing', async () => {
        const s = await open()
        const m = message()
        expect(await s.messages.insert(m, [])).toBe(true)
        expect(await s.messages.insert({ ...m, body: '{"other":true}' }, ['blob_x'])).toBe(false)
        expect(await s.messages.find(m.messageId)).toEqual(m)
        expect(await s.blobs.isReferenced('blob_x', T0)).toBe(false)
      })

      test('inbox: status as seen at now, filters, paging in (created_at, message_id) order', async () => {
        const s = await open()
        const r = key('R')
        const other = key('Q')
        const a = message({ createdAt: T0, messageId: 'msg_b' })
        const b = message({ createdAt: T0, messageId: 'msg_a' })
        const c = message({ createdAt: T0 + 1, senderKey: other, threadId: 'th_1', inReplyTo: 'msg_a' })
        const old = message({ createdAt: T0 - 2 * HOUR, expiresAt: T0 - HOUR })
        const ancient = message({ createdAt: T0 - 10 * HOUR, expiresAt: T0 - 9 * HOUR })
        const delivered = message({ createdAt: T0 + 2 })
        const notMine = message({ recipientKey: other })
        for (const m of [a, b, c, old, ancient, delivered, notMine]) await s.messages.insert(m, [])
        expect(await s.messages.markDeliveredFor(delivered.messageId, r, T0)).toBe(true)
        const now = T0 + 5
        const cutoff = now - 5 * HOUR
        const ids = (list: MessageRecord[]) => list.map((m) => m.messageId)
        expect(ids(await s.messages.listInbox(r, { status: 'sent' }, null, 10, now, cutoff))).toEqual(['msg_a', 'msg_b', c.messageId])
        expect(ids(await s.messages.listInbox(r, { status: 'sent' }, null, 2, now, cutoff))).toEqual(['msg_a', 'msg_b'])
        expect(ids(await s.messages.listInbox(r, { status: 'sent' }, { createdAt: T0, messageId: 'msg_b' }, 10, now, cutoff))).toEqual([c.messageId])
        expect(ids(await s.messages.listInbox(r, { status: 'sent', senderKey: other }, null, 10, now, cutoff))).toEqual([c.messageId])
        expect(ids(await s.messages.listInbox(r, { status: 'sent', threadId: 'th_1' }, null, 10, now, cutoff))).toEqual([c.messageId])
        expect(ids(await s.messages.listInbox(r, { status: 'sent', inReplyTo: 'msg_a' }, null, 10, now, cutoff))).toEqual([c.messageId])
        expect(ids(await s.messages.listInbox(r, { status: 'delivered' }, null, 10, now, cutoff))).toEqual([delivered.messageId])
        // expired by time before any sweep; one past retention is gone
        expect(ids(await s.messages.listInbox(r, { status: 'expired' }, null, 10, now, cutoff))).toEqual([old.messageId])
        // at a later now the sent ones count as expired, the delivered one as removed
        const later = T0 + 2 * HOUR
        expect(ids(await s.messages.listInbox(r, { status: 'sent' }, null, 10, later, later - 5 * HOUR))).toEqual([])
        expect(ids(await s.messages.listInbox(r, { status: 'delivered' }, null, 10, later, later - 5 * HOUR))).toEqual([])
        expect(ids(await s.messages.listInbox(r, { status: 'expired' }, null, 10, later, later - 5 * HOUR))).toEqual([old.messageId, 'msg_a', 'msg_b', c.messageId])
      })

      test('polls at once (read a page of sent messages and mark it, in one transaction) take the oldest, never share one', async () => {
        const s = await open()
        const r = key('R')
        const order: string[] = []
        for (let i = 0; i < 60; i++) {
          const m = message({ createdAt: T0 + i })
          order.push(m.messageId)
          await s.messages.insert(m, [])
        }
        // as the poll of the messages service: one more than the page, to tell whether more wait
        const poll = () =>
          s.transaction(async (tx) => {
            const found = await tx.messages.listInbox(r, { status: 'sent' }, null, 6, T0 + 100, T0 - HOUR)
            const page = found.slice(0, 5)
            for (const m of page) await tx.messages.find(m.messageId) // a unit that takes a while
            await tx.messages.markDelivered(page.map((m) => m.messageId), T0 + 100)
            return page.map((m) => order.indexOf(m.messageId))
          })
        const pages = await Promise.all(Array.from({ length: 14 }, poll))
        const got = pages.flat()
        expect(new Set(got).size).toBe(got.length)
        expect(got.length).toBe(60)
        // one after the other, each the oldest still waiting: full pages of consecutive messages
        expect(pages.filter((p) => p.length === 5).length).toBe(12)
        for (const p of pages) if (p.length) expect(p).toEqual([p[0], p[0] + 1, p[0] + 2, p[0] + 3, p[0] + 4])
      })

      test('thread: messages a participant sent or received that still exist', async () => {
        const s = await open()
        const me = key('Me')
        const peer = key('Peer')
        const stranger = key('Zed')
        const m1 = message({ threadId: 't', senderKey: me, recipientKey: peer, createdAt: T0 })
        const m2 = message({ threadId: 't', senderKey: peer, recipientKey: me, createdAt: T0 + 1 })
        const m3 = message({ threadId: 't', senderKey: peer, recipientKey: stranger, createdAt: T0 + 2 })
        const m4 = message({ threadId: 'u', senderKey: me, recipientKey: peer, createdAt: T0 + 3 })
        for (const m of [m1, m2, m3, m4]) await s.messages.insert(m, [])
        const now = T0 + 10
        expect((await s.messages.listThread('t', me, null, 10, now, now - HOUR)).map((m) => m.messageId)).toEqual([m1.messageId, m2.messageId])
        expect((await s.messages.listThread('t', me, { createdAt: T0, messageId: m1.messageId }, 10, now, now - HOUR)).map((m) => m.messageId)).toEqual([m2.messageId])
        expect((await s.messages.listThread('t', peer, null, 1, now, now - HOUR)).map((m) => m.messageId)).toEqual([m1.messageId])
      })

      test('delivery marks only sent, unexpired messages of the recipient', async () => {
        const s = await open()
        const r = key('R')
        const m1 = message()
        const m2 = message()
        const gone = message({ expiresAt: T0 + 1 })
        for (const m of [m1, m2, gone]) await s.messages.insert(m, [])
        expect(await s.messages.markDeliveredFor(m1.messageId, key('Other'), T0)).toBe(false)
        expect(await s.messages.markDeliveredFor(gone.messageId, r, T0 + 1)).toBe(false)
        expect(await s.messages.markDeliveredFor(m1.messageId, r, T0)).toBe(true)
        expect(await s.messages.markDeliveredFor(m1.messageId, r, T0)).toBe(false)
        expect(await s.messages.markDelivered([], T0)).toBe(0)
        expect(await s.messages.markDelivered([m1.messageId, m2.messageId, gone.messageId, 'msg_unknown'], T0 + 2)).toBe(1)
        expect(await s.messages.find(m2.messageId)).toMatchObject({ status: 'delivered', deliveredAt: T0 + 2 })
      })

      test('expiry sweep in batches: sent become expired without body, delivered are removed', async () => {
        const s = await open()
        const r = key('R')
        const list: MessageRecord[] = []
        for (let i = 0; i < 5; i++) list.push(message({ expiresAt: T0 + 100 + (i < 3 ? 0 : i), attachments: '[{"blob_id":"b"}]' }))
        for (const m of list) await s.messages.insert(m, ['blob_1'])
        await s.messages.markDeliveredFor(list[1].messageId, r, T0)
        await s.messages.markDeliveredFor(list[4].messageId, r, T0)
        const late = message({ expiresAt: T0 + 10_000 })
        await s.messages.insert(late, [])
        const now = T0 + 1000
        const first = await s.messages.expireBatch({ expiresAt: 0, key: null }, now, 2)
        expect(first.scanned).toBe(2)
        const second = await s.messages.expireBatch(first.last, now, 2)
        const third = await s.messages.expireBatch(second.last, now, 2)
        const fourth = await s.messages.expireBatch(third.last, now, 2)
        expect(first.scanned + second.scanned + third.scanned).toBe(5)
        expect(fourth).toEqual({ scanned: 0, expired: 0, removed: 0, last: third.last })
        expect(first.expired + second.expired + third.expired).toBe(3)
        expect(first.removed + second.removed + third.removed).toBe(2)
        expect(await s.messages.find(list[0].messageId)).toMatchObject({ status: 'expired', body: null, attachments: null })
        expect(await s.messages.find(list[1].messageId)).toBeNull()
        expect(await s.messages.find(late.messageId)).toMatchObject({ status: 'sent' })
        expect(await s.blobs.isReferenced('blob_1', T0)).toBe(false)
        // a cursor after every message of its time
        const again = await s.messages.expireBatch({ expiresAt: T0 + 100, key: null }, now, 10)
        expect(again.scanned).toBe(1) // list[3] (expires T0 + 103), expired already
        expect(await s.messages.removeExpiredBatch(T0 + 101, 10)).toBe(2)
        expect(await s.messages.removeExpiredBatch(T0 + 10_000, 1)).toBe(1)
        expect(await s.messages.removeAddressedTo(r)).toBe(1)
        expect(await s.messages.find(late.messageId)).toBeNull()
      })
    })

    test('acl: one entry per pair, newest first, type changes keep the place', async () => {
      const s = await open()
      const o = key('Owner')
      const first = await s.acl.insert(o, key('P1'), 'allow', T0)
      const second = await s.acl.insert(o, key('P2'), 'block', T0 + 1)
      await s.acl.insert(key('Else'), key('P1'), 'block', T0)
      expect(first).toEqual({ id: first.id, ownerKey: o, peerKey: key('P1'), entryType: 'allow', createdAt: T0, updatedAt: T0 })
      expect(await s.acl.insert(o, key('P1'), 'block', T0 + 2).then(() => 'inserted', () => 'refused')).toBe('refused')
      expect(await s.acl.entryTypeFor(o, key('P2'))).toBe('block')
      expect(await s.acl.entryTypeFor(o, key('P3'))).toBeNull()
      expect((await s.acl.list(o)).map((e) => e.peerKey)).toEqual([key('P2'), key('P1')])
      expect((await s.acl.list(o, 'allow')).map((e) => e.peerKey)).toEqual([key('P1')])
      await s.acl.setType(first.id, 'block', T0 + 5)
      expect(await s.acl.find(o, key('P1'))).toMatchObject({ entryType: 'block', createdAt: T0, updatedAt: T0 + 5 })
      expect((await s.acl.list(o)).map((e) => e.id)).toEqual([second.id, first.id])
      expect(await s.acl.count(o)).toBe(2)
      expect(await s.acl.delete(o, key('P2'))).toBe(true)
      expect(await s.acl.delete(o, key('P2'))).toBe(false)
      expect(await s.acl.removeOwnedBy(o)).toBe(1)
      expect(await s.acl.count(o)).toBe(0)
      expect(await s.acl.count(key('Else'))).toBe(1)
    })

    describe('blobs', () => {
      const blob = (id: string, owner: string, hash: string, size: number, expiresAt = T0 + HOUR) => ({
        blobId: id, ownerKey: owner, hash, sizeBytes: size, contentType: 'text/plain', createdAt: T0, expiresAt,
      })

      test('records: lookups, usage, readers, expiry extension, sweep', async () => {
        const s = await open()
        const o = key('Owner')
        const h1 = 'a'.repeat(64)
        const h2 = 'b'.repeat(64)
        await s.blobs.insert(blob('blob_1', o, h1, 100))
        await s.blobs.insert(blob('blob_2', o, h1, 100, T0 + 2 * HOUR))
        await s.blobs.insert(blob('blob_3', o, h2, 5_000_000_000))
        await s.blobs.insert(blob('blob_4', key('Other'), h2, 7, T0 + 10))
        expect(await s.blobs.find('blob_3')).toEqual(blob('blob_3', o, h2, 5_000_000_000))
        expect(await s.blobs.find('blob_9')).toBeNull()
        expect((await s.blobs.ownedByHash(o, h1, T0))?.blobId).toBe('blob_2')
        expect(await s.blobs.ownedByHash(key('Other'), h1, T0)).toBeNull()
        expect(await s.blobs.usage(o, T0)).toEqual({ usedBytes: 5_000_000_200, largestBytes: 5_000_000_000 })
        expect(await s.blobs.usage(key('Nobody'), T0)).toEqual({ usedBytes: 0, largestBytes: 0 })
        expect(await s.blobs.totalUsage(T0)).toBe(5_000_000_207)
        expect(await s.blobs.totalUsage(T0 + 20)).toBe(5_000_000_200)
        expect(await s.blobs.storedContents()).toEqual({ files: 2, bytes: 5_000_000_100 })

        // a party of an unexpired message attaching it may read it, a stranger may not
        const m = message({ senderKey: o, recipientKey: key('Reader'), expiresAt: T0 + 30 })
        await s.messages.insert(m, ['blob_1'])
        expect((await s.blobs.readableBy('blob_1', key('Reader'), T0))?.blobId).toBe('blob_1')
        expect((await s.blobs.readableBy('blob_1', o, T0))?.blobId).toBe('blob_1')
        expect(await s.blobs.readableBy('blob_1', key('Stranger'), T0)).toBeNull()
        expect(await s.blobs.readableBy('blob_1', key('Reader'), T0 + 30)).toBeNull()
        expect(await s.blobs.isReferenced('blob_1', T0)).toBe(true)
        expect(await s.blobs.isReferenced('blob_1', T0 + 30)).toBe(false)

        expect(await s.blobs.extendExpiry('blob_1', o, T0 + 3 * HOUR, T0)).toBe(true)
        expect(await s.blobs.extendExpiry('blob_1', o, T0 + 1, T0)).toBe(true)
        expect((await s.blobs.find('blob_1'))?.expiresAt).toBe(T0 + 3 * HOUR)
        expect(await s.blobs.extendExpiry('blob_1', key('Other'), T0 + 4 * HOUR, T0)).toBe(false)
        expect(await s.blobs.extendExpiry('blob_4', key('Other'), T0 + 4 * HOUR, T0 + 10)).toBe(false)
        expect((await s.blobs.ownedAmong(['blob_1', 'blob_4', 'blob_3', 'nope'], o, T0)).map((b) => b.blobId).sort()).toEqual(['blob_1', 'blob_3'])
        expect(await s.blobs.ownedAmong([], o, T0)).toEqual([])

        // blob_4 expired; blob_1 referenced until T0 + 30 even past its own expiry
        await s.blobs.insert(blob('blob_5', o, 'c'.repeat(64), 1, T0 + 5))
        expect((await s.blobs.removeExpiredBatch(T0 + 20, 10)).sort()).toEqual([h2, 'c'.repeat(64)])
        expect(await s.blobs.find('blob_4')).toBeNull()
        expect(await s.blobs.removeOwnedUnreferenced(o, T0)).toEqual(expect.arrayContaining([h1, h2]))
        expect(await s.blobs.find('blob_1')).not.toBeNull() // still attached
        expect(await s.blobs.delete('blob_1')).toBe(true)
        expect(await s.blobs.delete('blob_1')).toBe(false)
      })

      test('content bookkeeping: claims, removal marks, takeover of a stale mark', async () => {
        const s = await open()
        const h = 'd'.repeat(64)
        expect(await s.blobs.contentKnown(h)).toBe(false)
        expect(await s.blobs.claimContent(h, 10, T0, T0 - HOUR)).toBe(true)
        expect(await s.blobs.contentKnown(h)).toBe(true)
        // claimed within the grace period: not removable
        expect(await s.blobs.markContentDeleting(h, T0 - 1, T0 + 1)).toBe(false)
        await s.blobs.insert(blob('blob_1', key('O'), h, 10))
        await s.blobs.settleContent(h)
        // named by a record: never removable
        expect(await s.blobs.markContentDeleting(h, T0 + 1, T0 + 2)).toBe(false)
        await s.blobs.delete('blob_1')
        expect(await s.blobs.markContentDeleting(h, T0 - 1, T0 + 3)).toBe(true)
        expect(await s.blobs.contentsMarkedDeleting(10)).toEqual([h])
        // an upload waits while the cleanup runs, and takes over a mark left long ago
        expect(await s.blobs.claimContent(h, 10, T0 + 4, T0 + 2)).toBe(false)
        expect(await s.blobs.claimContent(h, 10, T0 + 5, T0 + 3)).toBe(true)
        expect(await s.blobs.contentsMarkedDeleting(10)).toEqual([])
        await s.blobs.forgetContent(h) // not marked: kept
        expect(await s.blobs.contentKnown(h)).toBe(true)
        await s.blobs.settleContent(h)
        expect(await s.blobs.markContentDeleting(h, T0, T0 + 6)).toBe(true)
        await s.blobs.forgetContent(h)
        expect(await s.blobs.contentKnown(h)).toBe(false)
        // bytes nobody claimed are removable at once
        expect(await s.blobs.markContentDeleting('e'.repeat(64), T0, T0)).toBe(true)
        expect(await s.blobs.contentsMarkedDeleting(1)).toEqual(['e'.repeat(64)])
      })
    })

    describe('webhooks', () => {
      test('registration, enqueue, failures, disable', async () => {
        const s = await open()
        const k = key('Hook')
        expect(await s.webhooks.find(k)).toBeNull()
        expect(await s.webhooks.isEnabled(k)).toBe(false)
        const hook = await s.webhooks.upsert(k, 'https://a.example/h', 'secret1', T0)
        expect(hook).toEqual({ publicKey: k, url: 'https://a.example/h', secret: 'secret1', enabled: true, consecutiveFailures: 0, createdAt: T0, updatedAt: T0 })
        expect(await s.webhooks.addFailure(k, 3, T0 + 1)).toEqual({ enabled: true, consecutiveFailures: 1 })
        await s.webhooks.resetFailures(k, T0 + 2)
        expect((await s.webhooks.find(k))?.consecutiveFailures).toBe(0)
        await s.webhooks.enqueue('d1', k, 'm1', T0)
        await s.webhooks.enqueue('d1', k, 'm1', T0) // duplicate ignored
        await s.webhooks.enqueue('d2', k, 'm2', T0)
        expect(await s.webhooks.pendingCount()).toBe(2)
        await s.webhooks.addFailure(k, 2, T0 + 3)
        expect(await s.webhooks.addFailure(k, 2, T0 + 4)).toEqual({ enabled: false, consecutiveFailures: 2 })
        expect(await s.webhooks.isEnabled(k)).toBe(false)
        expect(await s.webhooks.pendingCount()).toBe(0)
        expect(await s.webhooks.addFailure(key('Gone'), 2, T0)).toBeNull()
        const replaced = await s.webhooks.upsert(k, 'https://b.example/h', 'secret2', T0 + 9)
        expect(replaced).toMatchObject({ url: 'https://b.example/h', enabled: true, consecutiveFailures: 0, createdAt: T0, updatedAt: T0 + 9 })
        await s.webhooks.enqueue('d3', k, 'm3', T0)
        expect(await s.webhooks.cancelDeliveries(k)).toBe(1)
        await s.webhooks.enqueue('d4', k, 'm4', T0)
        expect(await s.webhooks.delete(k)).toBe(true)
        expect(await s.webhooks.delete(k)).toBe(false)
        expect(await s.webhooks.pendingCount()).toBe(0)
        await s.webhooks.upsert(k, 'https://b.example/h', 's', T0)
        await s.webhooks.enqueue('d5', k, 'm5', T0)
        await s.webhooks.removeFor(k)
        expect(await s.webhooks.find(k)).toBeNull()
        expect(await s.webhooks.pendingCount()).toBe(0)
      })

      test('claims are leased, oldest first, skipping excluded webhooks; released and failed ones come back', async () => {
        const s = await open()
        const a = key('HookA')
        const b = key('HookB')
        await s.webhooks.upsert(a, 'https://a.example', 'sa', T0)
        await s.webhooks.upsert(b, 'https://b.example', 'sb', T0)
        await s.webhooks.enqueue('d_a1', a, 'm1', T0 + 2)
        await s.webhooks.enqueue('d_a2', a, 'm2', T0 + 3)
        await s.webhooks.enqueue('d_b1', b, 'm3', T0 + 1)
        await s.webhooks.enqueue('d_late', b, 'm4', T0 + 100)
        const claimed = await s.webhooks.claimDue(T0 + 10, [], 10, T0 + 60)
        expect(claimed.map((d) => d.deliveryId)).toEqual(['d_b1', 'd_a1', 'd_a2'])
        expect(claimed[0]).toEqual({ deliveryId: 'd_b1', publicKey: b, messageId: 'm3', attempts: 0, url: 'https://b.example', secret: 'sb', consecutiveFailures: 0 })
        expect(await s.webhooks.claimDue(T0 + 20, [], 10, T0 + 80)).toEqual([])
        expect(await s.webhooks.pendingCount()).toBe(4)
        // the lease ends: an attempt that never reported is made again
        expect((await s.webhooks.claimDue(T0 + 60, [b], 10, T0 + 120)).map((d) => d.deliveryId)).toEqual(['d_a1', 'd_a2'])
        await s.webhooks.release('d_a1', T0 + 70)
        await s.webhooks.recordFailure('d_a2', 1, T0 + 75, 'x'.repeat(600), T0 + 61)
        await s.webhooks.finish('d_b1')
        expect((await s.webhooks.claimDue(T0 + 74, [], 10, T0 + 200)).map((d) => d.deliveryId)).toEqual(['d_a1'])
        const retried = await s.webhooks.claimDue(T0 + 100, [], 1, T0 + 200)
        expect(retried.map((d) => [d.deliveryId, d.attempts])).toEqual([['d_a2', 1]])
        expect(await s.webhooks.pendingCount()).toBe(3)
      })

      test('two claimers at once never get the same delivery', async () => {
        const s = await open()
        const hooks = [key('H1'), key('H2'), key('H3')]
        for (const h of hooks) await s.webhooks.upsert(h, 'https://x.example', 's', T0)
        for (let i = 0; i < 60; i++) await s.webhooks.enqueue(`d${i}`, hooks[i % 3], `m${i}`, T0 + i)
        const results = await Promise.all(Array.from({ length: 4 }, () => s.webhooks.claimDue(T0 + 100, [], 20, T0 + 1000)))
        const ids = results.flat().map((d) => d.deliveryId)
        expect(new Set(ids).size).toBe(ids.length)
        expect(ids.length).toBe(60)
      })
    })

    test('replay: a second reservation is refused until the entry is pruned', async () => {
      const s = await open()
      const first = await s.replay.reserve('sig_aaaaaaaaaaaaaaaaaaa', T0 + 10)
      expect(first).not.toBeNull()
      await first?.durable
      expect(await s.replay.reserve('sig_aaaaaaaaaaaaaaaaaaa', T0 + 10)).toBeNull()
      const other = await s.replay.reserve('sig_bbbbbbbbbbbbbbbbbbb', T0 + 20)
      await other?.durable
      expect(await s.replay.prune(T0 + 5, 100)).toBe(0)
      expect(await s.replay.prune(T0 + 10, 100)).toBe(1)
      expect(await s.replay.reserve('sig_bbbbbbbbbbbbbbbbbbb', T0 + 20)).toBeNull()
      expect(await s.replay.reserve('sig_aaaaaaaaaaaaaaaaaaa', T0 + 30)).not.toBeNull()
    })

    test('rates: an exact sliding window', async () => {
      const s = await open()
      const window = 60_000
      for (let i = 0; i < 30; i++) {
        const hit = await s.rates.hit('send:k', 30, window, T0 + i * 1000)
        expect(hit).toEqual({ allowed: true, count: i + 1, oldestAt: T0 })
      }
      expect(await s.rates.hit('send:k', 30, window, T0 + 59_999)).toEqual({ allowed: false, count: 30, oldestAt: T0 })
      expect(await s.rates.peek('send:k', window, T0 + 59_999)).toEqual({ count: 30, oldestAt: T0 })
      expect(await s.rates.peek('other', window, T0)).toEqual({ count: 0, oldestAt: T0 })
      // the oldest event leaves the window: one more fits
      expect(await s.rates.hit('send:k', 30, window, T0 + 60_000)).toEqual({ allowed: true, count: 30, oldestAt: T0 + 1000 })
      expect(await s.rates.hit('send:k', 30, window, T0 + 60_000)).toEqual({ allowed: false, count: 30, oldestAt: T0 + 1000 })
      await s.rates.hit('idle', 5, window, T0)
      expect(await s.rates.prune(window, T0 + 200_000)).toBe(2)
      expect(await s.rates.peek('send:k', window, T0 + 200_000)).toEqual({ count: 0, oldestAt: T0 + 200_000 })
    })

    test('rates: a hit of several events counts all of them or none', async () => {
      const s = await open()
      const window = 60_000
      expect(await s.rates.hit('poll:k', 10, window, T0, 4)).toEqual({ allowed: true, count: 4, oldestAt: T0 })
      expect(await s.rates.hit('poll:k', 10, window, T0 + 10, 7)).toEqual({ allowed: false, count: 4, oldestAt: T0 })
      expect(await s.rates.hit('poll:k', 10, window, T0 + 20, 6)).toEqual({ allowed: true, count: 10, oldestAt: T0 })
      expect(await s.rates.peek('poll:k', window, T0 + 20)).toEqual({ count: 10, oldestAt: T0 })
      // the four of T0 leave the window together
      expect(await s.rates.hit('poll:k', 10, window, T0 + 60_000, 4)).toEqual({ allowed: true, count: 10, oldestAt: T0 + 20 })
    })

    describe('discovery', () => {
      async function population(s: Storage) {
        const make = async (head: string, at: number, profile: Parameters<Storage['agents']['updateProfile']>[1]) => {
          const k = key(head)
          await s.agents.create(k, at)
          await s.agents.updateProfile(k, { visibility: 'public', ...profile }, at)
          return k
        }
        const translator = await make('Btrans', T0 + 10, {
          displayName: 'Tränslator Bot',
          capabilities: caps({ name: 'translate', description: 'Turns French text into English', tags: ['Lang', 'nlp'] }),
        })
        const summarizer = await make('asum', T0 + 10, {
          displayName: '100% Summaries_bot',
          capabilities: caps({ name: 'summarize', description: 'Short text', tags: ['nlp'] }, { name: 'chat', tags: ['chat', 'nlp'] }),
        })
        const coder = await make('Ccode', T0 + 30, { displayName: 'Coder', capabilities: caps({ name: 'code-review', tags: ['code'] }) })
        const hidden = await make('Dhidden', T0 + 40, { visibility: 'private', displayName: 'Hidden Bot', capabilities: caps({ name: 'translate', tags: ['nlp'] }) })
        const banned = await make('Eban', T0 + 50, { displayName: 'Banned Bot', capabilities: caps({ name: 'translate', tags: ['nlp'] }) })
        await s.agents.suspend(banned, 'spam', T0 + 51)
        return { translator, summarizer, coder, hidden, banned }
      }
      const keys = (list: { publicKey: string }[]) => list.map((r) => r.publicKey)

      test('public active agents, newest activity first, then by key byte order', async () => {
        const s = await open()
        const p = await population(s)
        expect(keys(await s.discovery.search(filter()))).toEqual([p.coder, p.translator, p.summarizer])
        const page = await s.discovery.search(filter({ limit: 2 }))
        expect(keys(page)).toEqual([p.coder, p.translator])
        expect(page[1]).toEqual({
          publicKey: p.translator,
          displayName: 'Tränslator Bot',
          lastActiveAt: T0 + 10,
          capabilities: caps({ name: 'translate', description: 'Turns French text into English', tags: ['Lang', 'nlp'] }),
        })
        expect(keys(await s.discovery.search(filter({ after: { lastActiveAt: T0 + 10, publicKey: p.translator } })))).toEqual([p.summarizer])
        expect(keys(await s.discovery.search(filter({ activeSince: T0 + 20 })))).toEqual([p.coder])
      })

      test('tags (all of them), words (prefixes, folded), name substring (literal)', async () => {
        const s = await open()
        const p = await population(s)
        expect(keys(await s.discovery.search(filter({ tags: ['nlp'] })))).toEqual([p.translator, p.summarizer])
        expect(keys(await s.discovery.search(filter({ tags: ['nlp', 'lang'] })))).toEqual([p.translator])
        expect(keys(await s.discovery.search(filter({ tags: ['nlp', 'code'] })))).toEqual([])
        expect(keys(await s.discovery.search(filter({ tags: ['unused'] })))).toEqual([])
        expect(keys(await s.discovery.search(filter({ words: ['trans'] })))).toEqual([p.translator])
        expect(keys(await s.discovery.search(filter({ words: ['TRANSLATOR'] })))).toEqual([p.translator])
        expect(keys(await s.discovery.search(filter({ words: ['bot'] })))).toEqual([p.translator, p.summarizer])
        expect(keys(await s.discovery.search(filter({ words: ['bot', 'french'] })))).toEqual([p.translator])
        expect(keys(await s.discovery.search(filter({ words: ['text'], tags: ['chat'] })))).toEqual([p.summarizer])
        expect(keys(await s.discovery.search(filter({ words: ['review'] })))).toEqual([p.coder])
        expect(keys(await s.discovery.search(filter({ words: ['OR'] })))).toEqual([])
        expect(keys(await s.discovery.search(filter({ words: ['"bot'] })))).toEqual([p.translator, p.summarizer])
        expect(keys(await s.discovery.search(filter({ nameContains: 'BOT' })))).toEqual([p.translator, p.summarizer])
        expect(keys(await s.discovery.search(filter({ nameContains: '100%' })))).toEqual([p.summarizer])
        expect(keys(await s.discovery.search(filter({ nameContains: 's_b' })))).toEqual([p.summarizer])
        expect(keys(await s.discovery.search(filter({ nameContains: '%' })))).toEqual([p.summarizer])
        expect(keys(await s.discovery.search(filter({ nameContains: 'xyz' })))).toEqual([])
      })

      test('the catalog counts public active agents per tag and follows every change', async () => {
        const s = await open()
        const p = await population(s)
        expect(await s.discovery.catalog({ prefix: '', limit: 10 })).toEqual([
          { tag: 'nlp', agentCount: 2 },
          { tag: 'chat', agentCount: 1 },
          { tag: 'code', agentCount: 1 },
          { tag: 'lang', agentCount: 1 },
        ])
        expect(await s.discovery.catalog({ prefix: 'c', limit: 10 })).toEqual([
          { tag: 'chat', agentCount: 1 },
          { tag: 'code', agentCount: 1 },
        ])
        expect(await s.discovery.catalog({ prefix: '', limit: 1 })).toEqual([{ tag: 'nlp', agentCount: 2 }])
        await s.agents.suspend(p.translator, null, T0 + 60)
        await s.agents.unsuspend(p.banned, T0 + 61)
        await s.agents.updateProfile(p.hidden, { visibility: 'public' }, T0 + 62)
        await s.agents.updateProfile(p.coder, { capabilities: caps({ name: 'code', tags: ['nlp'] }) }, T0 + 63)
        await s.agents.delete(p.summarizer)
        expect(await s.discovery.catalog({ prefix: '', limit: 10 })).toEqual([{ tag: 'nlp', agentCount: 3 }])
        expect(keys(await s.discovery.search(filter({ tags: ['nlp'] })))).toEqual([p.banned, p.hidden, p.coder])
        expect(keys(await s.discovery.search(filter({ words: ['review'] })))).toEqual([])
        await s.agents.touch(p.coder, T0 + 100)
        expect(keys(await s.discovery.search(filter({ tags: ['nlp'] })))).toEqual([p.coder, p.banned, p.hidden])
      })
    })

    test('admission: allow, list oldest first, revoke; the version moves with every change', async () => {
      const s = await open()
      const v0 = await s.admission.version()
      expect(await s.admission.allow(key('K2'), 'second', T0 + 1)).toBe(true)
      expect(await s.admission.allow(key('K1'), null, T0)).toBe(true)
      expect(await s.admission.allow(key('K1'), 'again', T0 + 5)).toBe(false)
      const v1 = await s.admission.version()
      expect(v1).not.toBe(v0)
      expect(await s.admission.isAllowed(key('K1'))).toBe(true)
      expect(await s.admission.isAllowed(key('K3'))).toBe(false)
      expect(await s.admission.list()).toEqual([
        { publicKey: key('K1'), note: null, createdAt: T0 },
        { publicKey: key('K2'), note: 'second', createdAt: T0 + 1 },
      ])
      expect(await s.admission.revoke(key('K1'))).toBe(true)
      expect(await s.admission.revoke(key('K1'))).toBe(false)
      expect(await s.admission.version()).not.toBe(v1)
      expect(await s.admission.isAllowed(key('K1'))).toBe(false)
    })

    test('any well-formed text round-trips exactly: U+0000, noncharacters, escapes in JSON text', async () => {
      const s = await open()
      const k = key('Text')
      const name = 'nul\u0000here \uFDD0\uFDD0\u0000 \u0000\uFDD0 \uFDD00 ÿ 🚀 \u202e'
      const capabilities = JSON.stringify([{ name: 'echo', description: 'nul \u0000 inside', tags: ['text'] }])
      await s.agents.create(k, T0)
      await s.agents.updateProfile(k, { displayName: name, visibility: 'public', capabilities, metadata: '{"a":"\\u0000"}' }, T0 + 1)
      expect(await s.agents.find(k)).toMatchObject({ displayName: name, capabilities, metadata: '{"a":"\\u0000"}' })
      expect((await s.discovery.search(filter({ nameContains: '\u0000here' }))).map((r) => r.displayName)).toEqual([name])
      expect((await s.discovery.search(filter({ tags: ['text'], words: ['echo'] }))).map((r) => r.publicKey)).toEqual([k])
      await s.agents.suspend(k, 'why\u0000not', T0 + 2)
      expect((await s.agents.find(k))?.suspendedReason).toBe('why\u0000not')
      const m = message({ threadId: 'th\u0000', inReplyTo: '\u0000', contentType: 'text/x\u0000y', recipientKey: k })
      await s.messages.insert(m, [])
      expect(await s.messages.find(m.messageId)).toEqual(m)
      expect(await s.messages.find('msg_\u0000')).toBeNull()
      expect((await s.messages.listInbox(k, { status: 'sent', threadId: 'th\u0000', inReplyTo: '\u0000' }, null, 10, T0, T0 - HOUR)).map((r) => r.messageId)).toEqual([m.messageId])
      expect(await s.messages.listInbox(k, { status: 'sent', threadId: 'th' }, null, 10, T0, T0 - HOUR)).toEqual([])
      expect((await s.messages.listThread('th\u0000', k, null, 10, T0, T0 - HOUR)).length).toBe(1)
      await s.admission.allow(key('Note'), 'note\u0000', T0)
      expect(await s.admission.list()).toEqual([{ publicKey: key('Note'), note: 'note\u0000', createdAt: T0 }])
    })

    test('state: numbers by key', async () => {
      const s = await open()
      expect(await s.state.getNumber('sweep.messages')).toBeNull()
      await s.state.setNumber('sweep.messages', T0)
      await s.state.setNumber('sweep.messages', T0 + 1)
      expect(await s.state.getNumber('sweep.messages')).toBe(T0 + 1)
    })

    test('a transaction is atomic: a failure leaves nothing of it, a success all of it', async () => {
      const s = await open()
      const m = message()
      const failure = await s
        .transaction(async (tx) => {
          await tx.agents.create(key('Tx'), T0)
          await tx.messages.insert(m, ['blob_1'])
          await tx.acl.insert(key('Tx'), key('Peer'), 'block', T0)
          await tx.webhooks.upsert(key('Tx'), 'https://x.example', 's', T0)
          await tx.state.setNumber('n', 1)
          expect(await tx.messages.find(m.messageId)).not.toBeNull()
          throw new Error('boom')
        })
        .catch((err: Error) => err.message)
      expect(failure).toBe('boom')
      expect(await s.agents.find(key('Tx'))).toBeNull()
      expect(await s.messages.find(m.messageId)).toBeNull()
      expect(await s.acl.count(key('Tx'))).toBe(0)
      expect(await s.webhooks.find(key('Tx'))).toBeNull()
      expect(await s.state.getNumber('n')).toBeNull()
      const value = await s.transaction(async (tx) => {
        await tx.messages.insert(m, [])
        await tx.state.setNumber('n', 2)
        return 'done'
      })
      expect(value).toBe('done')
      expect(await s.messages.find(m.messageId)).toEqual(m)
      expect(await s.state.getNumber('n')).toBe(2)
    })

    test('exclusive: a second run of a job while the first runs does not run', async () => {
      const s = await open()
      let release!: () => void
      const gate = new Promise<void>((r) => (release = r))
      const first = s.exclusive('sweep', async () => {
        await gate
        return 1
      })
      await Bun.sleep(50)
      expect(await s.exclusive('sweep', async () => 2)).toEqual({ ran: false })
      expect(await s.exclusive('other', async () => 3)).toEqual({ ran: true, value: 3 })
      release()
      expect(await first).toEqual({ ran: true, value: 1 })
      expect(await s.exclusive('sweep', async () => 4)).toEqual({ ran: true, value: 4 })
    })

    test('figures for operators', async () => {
      const s = await open()
      await s.agents.create(key('A'), T0)
      await s.agents.suspend(key('B'), null, T0)
      await s.messages.insert(message(), [])
      await s.messages.insert(message({ expiresAt: T0 + 1 }), [])
      const f = await s.stats.figures(T0 + 5)
      expect(f.agents).toEqual({ active: 1, suspended: 1, total: 2 })
      expect(f.messages).toEqual({ sent: 1, delivered: 0, expired: 1, total: 2 })
      expect(f.database.size_bytes).toBeGreaterThan(0)
      expect((await s.health()).status).toBe('ok')
      expect(await s.ready()).toBeNull()
    })
  })
}

const pgBin = postgresRunner('storage error mapping against PostgreSQL')
describe.skipIf(pgBin === null)('storage contract: postgres failures', () => {
  test('a stopped server answers service_unavailable (503 with Retry-After), and service resumes', async () => {
    const pg = await startPostgres(pgBin as string)
    try {
      const url = await pg.createDatabase('failures')
      const { storage } = await openPostgres(url, { logger: silentLogger, clock: new FakeClock(), lockWaitMs: 500 })
      await storage.agents.create(key('A'), T0)
      await pg.stop()
      const read = await storage.messages.find('msg_x').catch((err) => err)
      expect(read).toBeInstanceOf(RelayError)
      expect(read.code).toBe('service_unavailable')
      expect(read.headers?.['Retry-After']).toBeDefined()
      const tx = await storage.transaction(async (t) => t.state.setNumber('x', 1)).catch((err) => err)
      expect(tx).toBeInstanceOf(RelayError)
      expect(tx.code).toBe('service_unavailable')
      expect((await storage.health()).status).toBe('down')
      expect(await storage.ready()).not.toBeNull()
      await pg.start()
      let back: unknown = null
      for (let i = 0; i < 50 && back === null; i++) {
        back = await storage.agents.count().catch(() => null)
        if (back === null) await Bun.sleep(100)
      }
      expect(back).toBe(1)
      await storage.close()
    } finally {
      await pg.remove()
    }
  })

  test('a write that waits on a row lock longer than lockWaitMs answers service_unavailable', async () => {
    const pg = await sharedPostgres(pgBin as string)
    const url = await pg.createDatabase('locked')
    const { storage } = await openPostgres(url, { logger: silentLogger, clock: new FakeClock(), lockWaitMs: 200 })
    try {
      await storage.state.setNumber('x', 1)
      let release!: () => void
      const gate = new Promise<void>((r) => (release = r))
      const holder = storage.transaction(async (tx) => {
        await tx.state.setNumber('x', 2)
        await gate
      })
      await Bun.sleep(50)
      const err = await storage.transaction(async (tx) => tx.state.setNumber('x', 3)).catch((e) => e)
      expect(err).toBeInstanceOf(RelayError)
      expect(err.code).toBe('service_unavailable')
      release()
      await holder
      expect(await storage.state.getNumber('x')).toBe(2)
    } finally {
      await storage.close()
    }
  })

  test('an unreachable database is reported in one line without the password', async () => {
    const err = await openPostgres('postgres://relay:hunter2@127.0.0.1:1/relaydb', { logger: silentLogger, clock: new FakeClock(), lockWaitMs: 500 }).catch((e) => e)
    expect(err).toBeInstanceOf(Error)
    expect(err.message).toMatch(/^database postgres:\/\/relay@127\.0\.0\.1:1\/relaydb is unreachable: /)
    expect(err.message).not.toContain('hunter2')
    expect(err.message).not.toContain('\n')
  })
})
