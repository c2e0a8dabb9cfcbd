/**
 * The owners that may have ACL entries are kept in memory, so a send to an inbox without entries skips
 * the lookup. The set never misses an owner with an entry: not one written by the relay (committed or
 * not), and not one written by another process on the same file (`relay admin`, an sqlite3 shell),
 * which the next event-loop turn sees, reading only the rows added since it last looked.
 */
import { Database } from 'bun:sqlite'
import { afterAll, describe, expect, test } from 'bun:test'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { AclOwners } from '../../src/storage/sqlite/acl-owners.ts'
import { openConnection, openDatabase } from '../../src/storage/sqlite/database.ts'
import { expectError, startTestRelay, tempDir } from '../support/harness.ts'
import { agent, msg, rawSend } from '../messages/helpers.ts'

const dir = tempDir()
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** The next event-loop turn. */
const turn = () => new Promise<void>((resolve) => setImmediate(resolve))

const insert = (db: Database, owner: string, peer: string, type = 'block') =>
  db.run(`INSERT INTO acl_entries (owner_key, peer_key, entry_type, created_at, updated_at) VALUES (?, ?, ?, 1, 1)`, [owner, peer, type])

describe('AclOwners', () => {
  test("another connection's inserts are seen from the next event-loop turn; the relay's own writes at once, rolled back or not", async () => {
    const path = join(dir, 'unit.db')
    const writer = openDatabase(path)
    const other = openConnection(path, 1000)
    try {
      const owners = new AclOwners(writer)
      expect(owners.mayHave('A')).toBe(false)
      insert(other, 'A', 'P')
      expect(owners.mayHave('A')).toBe(false) // the same turn: data_version is read once per turn
      await turn()
      expect(owners.mayHave('A')).toBe(true)
      expect(owners.mayHave('nobody')).toBe(false)

      // an entry being written in the relay's own transaction counts before its commit, and after a rollback
      writer.run('BEGIN IMMEDIATE')
      owners.add('B')
      insert(writer, 'B', 'P')
      expect(owners.mayHave('B')).toBe(true)
      writer.run('ROLLBACK')
      expect(owners.mayHave('B')).toBe(true)

      // another process committed, and the writer is inside a transaction: nothing is read from there, so "may"
      insert(other, 'C', 'P')
      await turn()
      writer.run('BEGIN IMMEDIATE')
      writer.run(`DELETE FROM acl_entries WHERE owner_key = 'C'`)
      expect(owners.mayHave('C')).toBe(true)
      expect(owners.mayHave('nobody')).toBe(true)
      writer.run('ROLLBACK')
      expect(owners.mayHave('C')).toBe(true)
      expect(owners.mayHave('nobody')).toBe(false)
    } finally {
      other.close()
      writer.close()
    }
  })

  test("other processes' checkpoints and deletes read no rows; their inserts only the new ones", async () => {
    const path = join(dir, 'incremental.db')
    const writer = openDatabase(path)
    const other = openConnection(path, 1000)
    try {
      for (let i = 0; i < 50; i++) insert(writer, `owner${i}`, 'P')
      const owners = new AclOwners(writer)
      expect(owners.mayHave('owner7')).toBe(true)
      expect(owners.rowsRead).toBe(50)
      const dataVersion = () => writer.query<{ data_version: number }, []>('PRAGMA data_version').get()!.data_version
      const before = dataVersion()
      other.run('PRAGMA wal_checkpoint(TRUNCATE)') // changes data_version, as another process's commit does
      other.run(`DELETE FROM acl_entries WHERE owner_key = 'owner3'`)
      expect(dataVersion()).not.toBe(before)
      await turn()
      expect(owners.mayHave('owner3')).toBe(true) // never shrinks: a lookup decides
      expect(owners.rowsRead).toBe(50)
      insert(other, 'late', 'P')
      await turn()
      expect(owners.mayHave('late')).toBe(true)
      expect(owners.rowsRead).toBe(51)
    } finally {
      other.close()
      writer.close()
    }
  })
})

describe('sends against the set', () => {
  test('an entry written by another process on the file applies to the next send, both ways', async () => {
    const t = await startTestRelay()
    const shell = new Database(join(t.dataDir, 'relay.db'))
    shell.run('PRAGMA busy_timeout = 5000')
    try {
      const a = await agent(t)
      const blocking = await agent(t, { inbox_policy: 'blocklist' })
      const allowing = await agent(t, { inbox_policy: 'allowlist' })
      expect((await rawSend(a, msg(blocking))).status).toBe(201)
      await expectError(await rawSend(a, msg(allowing)), 403, 'acl_denied')

      insert(shell, blocking.publicKey, a.publicKey, 'block')
      insert(shell, allowing.publicKey, a.publicKey, 'allow')
      await expectError(await rawSend(a, msg(blocking)), 403, 'acl_denied')
      expect((await rawSend(a, msg(allowing))).status).toBe(201)

      shell.run('DELETE FROM acl_entries')
      expect((await rawSend(a, msg(blocking))).status).toBe(201)
      await expectError(await rawSend(a, msg(allowing)), 403, 'acl_denied')

      // and the API's own entries, in one relay: the set learns them as they are written
      await blocking.acl.block(a.publicKey)
      await expectError(await rawSend(a, msg(blocking)), 403, 'acl_denied')
    } finally {
      shell.close()
      await t.close()
    }
  })
})
