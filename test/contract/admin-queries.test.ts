/**
 * The AdminQueries contract (src/services/ports.ts), written against the Storage interface only so that
 * it runs unchanged against every storage implementation: agents in creation order, filtered by status,
 * resumed after a position; the webhook queue without finished deliveries, soonest due first.
 */
import { afterEach, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { silentLogger } from '../../src/lib/logger.ts'
import type { Storage } from '../../src/services/ports.ts'
import { SqliteStorage } from '../../src/storage/sqlite/sqlite-storage.ts'
import { PREPARE_TIMEOUT_MS, postgresBackend } from './backends.ts'

interface Implementation {
  name: string
  prepare?(): Promise<void>
  open(): Promise<{ storage: Storage; close(): Promise<void> }>
}

const IMPLEMENTATIONS: Implementation[] = [
  {
    name: 'sqlite',
    async open() {
      const dir = mkdtempSync(join(tmpdir(), 'relay-admin-queries-'))
      const storage = new SqliteStorage({ path: join(dir, 'relay.db'), lockWaitMs: 1000, logger: silentLogger, now: 0 })
      return {
        storage,
        async close() {
          await storage.close()
          rmSync(dir, { recursive: true, force: true })
        },
      }
    },
  },
  // PostgreSQL (cluster mode) when its programs are installed: a fresh database on the test server
  ...(postgresBackend.available ? [{ name: 'postgres', prepare: () => postgresBackend.prepare(), open: () => postgresBackend.open() }] : []),
]

const T0 = Date.parse('2026-11-22T10:00:00.000Z')

for (const impl of IMPLEMENTATIONS) {
  describe(`AdminQueries on ${impl.name}`, () => {
    beforeAll(() => impl.prepare?.(), PREPARE_TIMEOUT_MS)
    let opened: Awaited<ReturnType<Implementation['open']>> | undefined
    afterEach(async () => {
      await opened?.close()
      opened = undefined
    })

    test('listAgents: creation order (then key), status filter, resume after a position, limit', async () => {
      opened = await impl.open()
      const { storage } = opened
      const keys = Array.from({ length: 5 }, () => generateKeyPair().publicKey)
      // two agents share a creation time: the key breaks the tie
      const times = [T0, T0 + 10, T0 + 10, T0 + 20, T0 + 30]
      for (let i = 0; i < keys.length; i++) await storage.agents.create(keys[i], times[i])
      await storage.agents.suspend(keys[3], 'abuse', T0 + 40)
      const expected = keys.map((k, i) => ({ k, t: times[i] })).sort((a, b) => a.t - b.t || (a.k < b.k ? -1 : 1)).map((x) => x.k)

      const all = await storage.adminQueries.listAgents({ status: null, after: null, limit: 10 })
      expect(all.map((a) => a.publicKey)).toEqual(expected)
      expect(all.find((a) => a.publicKey === keys[3])).toMatchObject({ status: 'suspended', suspendedReason: 'abuse' })

      const firstTwo = await storage.adminQueries.listAgents({ status: null, after: null, limit: 2 })
      expect(firstTwo.map((a) => a.publicKey)).toEqual(expected.slice(0, 2))
      const last = firstTwo[1]
      const rest = await storage.adminQueries.listAgents({ status: null, after: { createdAt: last.createdAt, publicKey: last.publicKey }, limit: 10 })
      expect(rest.map((a) => a.publicKey)).toEqual(expected.slice(2))

      expect((await storage.adminQueries.listAgents({ status: 'suspended', after: null, limit: 10 })).map((a) => a.publicKey)).toEqual([keys[3]])
      expect((await storage.adminQueries.listAgents({ status: 'active', after: null, limit: 10 })).map((a) => a.publicKey)).toEqual(expected.filter((k) => k !== keys[3]))
    })

    test('listQueuedDeliveries: pending and in flight, soonest due first, finished ones gone', async () => {
      opened = await impl.open()
      const { storage } = opened
      const key = generateKeyPair().publicKey
      await storage.webhooks.upsert(key, 'https://example.invalid/hook', 'c2VjcmV0', T0)
      await storage.webhooks.enqueue('dlv_late', key, 'msg_1', T0 + 50)
      await storage.webhooks.enqueue('dlv_early', key, 'msg_2', T0 + 10)
      await storage.webhooks.enqueue('dlv_done', key, 'msg_3', T0)
      await storage.webhooks.finish('dlv_done')
      await storage.webhooks.recordFailure('dlv_late', 1, T0 + 60_000, 'HTTP 500', T0 + 51)
      const claimed = await storage.webhooks.claimDue(T0 + 20, [], 1, T0 + 30_000)
      expect(claimed.map((d) => d.deliveryId)).toEqual(['dlv_early'])

      const queue = await storage.adminQueries.listQueuedDeliveries(10)
      expect(queue.map((d) => [d.deliveryId, d.state, d.attempts, d.nextAttemptAt, d.lastError])).toEqual([
        ['dlv_early', 'in_flight', 0, T0 + 30_000, null],
        ['dlv_late', 'pending', 1, T0 + 60_000, 'HTTP 500'],
      ])
      expect(queue[1]).toMatchObject({ publicKey: key, messageId: 'msg_1' })
      expect(await storage.adminQueries.listQueuedDeliveries(1)).toHaveLength(1)
    })
  })
}
