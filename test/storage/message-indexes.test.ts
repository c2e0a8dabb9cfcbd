/**
 * The messages table keeps only the indexes its statements read: the inbox, the expiry order, and
 * the thread index holding only messages that have a thread. A database made before that (with a
 * sender index, a reply index and a full thread index) is migrated and answers the same.
 */
import type { Database } from 'bun:sqlite'
import { afterAll, describe, expect, test } from 'bun:test'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { openDatabase, openConnection } from '../../src/storage/sqlite/database.ts'
import { MIGRATION_JOURNAL, MIGRATION_SQL } from '../../src/storage/sqlite/embedded-migrations.ts'
import { SqliteMessageStore } from '../../src/storage/sqlite/messages-store.ts'
import { tempDir } from '../support/harness.ts'

const dir = tempDir()
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const indexesOf = (db: Database) =>
  db
    .query<{ name: string; sql: string | null }, []>(`SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'messages' ORDER BY name`)
    .all()

/** Applies the embedded migrations up to and including `lastTag`, with drizzle's bookkeeping. */
function migrateUpTo(db: Database, lastTag: string) {
  db.run(`CREATE TABLE IF NOT EXISTS __drizzle_migrations (id INTEGER PRIMARY KEY AUTOINCREMENT, hash text NOT NULL, created_at numeric)`)
  for (const entry of MIGRATION_JOURNAL.entries) {
    for (const statement of MIGRATION_SQL[entry.tag].split('--> statement-breakpoint')) if (statement.trim()) db.run(statement)
    db.run(`INSERT INTO __drizzle_migrations (hash, created_at) VALUES (?, ?)`, [entry.tag, entry.when])
    if (entry.tag === lastTag) return
  }
  throw new Error(`no migration ${lastTag}`)
}

const NOW = Date.parse('2026-12-01T00:00:00Z')
function message(id: string, threadId: string | null) {
  return {
    messageId: id, senderKey: 'S'.repeat(43), recipientKey: 'R'.repeat(43), contentType: 'application/json', body: '{}', attachments: null,
    threadId, inReplyTo: null, metadata: null, status: 'sent' as const, createdAt: NOW, expiresAt: NOW + 3_600_000, deliveredAt: null,
  }
}

describe('the indexes of the messages table', () => {
  test('a new database has the inbox, expiry and partial thread indexes, nothing else', () => {
    const db = openDatabase(join(dir, 'new.db'))
    const indexes = indexesOf(db)
    expect(indexes.map((i) => i.name)).toEqual(['messages_expires_idx', 'messages_inbox_idx', 'messages_thread_idx', 'sqlite_autoindex_messages_1'])
    expect(indexes.find((i) => i.name === 'messages_thread_idx')!.sql).toMatch(/WHERE "messages"\."thread_id" IS NOT NULL$/)
    db.close()
  })

  test('the thread listing reads the thread index, by name: without it the store does not prepare', async () => {
    const db = openDatabase(join(dir, 'entries.db'))
    const store = new SqliteMessageStore(db)
    await store.insert(message('msg_1764547200_000000000001', null), [])
    await store.insert(message('msg_1764547200_000000000002', 't1'), [])
    const listed = await store.listThread('t1', 'R'.repeat(43), null, 10, NOW, 0)
    expect(listed.map((m) => m.messageId)).toEqual(['msg_1764547200_000000000002'])
    // a plan that could not use the partial index would scan every message: it is an error instead
    db.run('DROP INDEX messages_thread_idx')
    expect(() => new SqliteMessageStore(db)).toThrow(/messages_thread_idx/)
    db.close()
  })

  test('a database made with the earlier indexes is migrated, and its threads still list', async () => {
    const path = join(dir, 'old.db')
    const old = openConnection(path, 5000)
    migrateUpTo(old, '0006_blob_contents_admission')
    expect(indexesOf(old).map((i) => i.name)).toContain('messages_sender_idx')
    const before = new SqliteMessageStore(old)
    // the store prepares its statements against the schema it finds: the old one has a full thread index
    await before.insert(message('msg_1764547200_00000000000a', 'old-thread'), [])
    await before.insert(message('msg_1764547200_00000000000b', null), [])
    old.close()

    const db = openDatabase(path)
    expect(indexesOf(db).map((i) => i.name)).toEqual(['messages_expires_idx', 'messages_inbox_idx', 'messages_thread_idx', 'sqlite_autoindex_messages_1'])
    const store = new SqliteMessageStore(db)
    expect((await store.listThread('old-thread', 'S'.repeat(43), null, 10, NOW, 0)).map((m) => m.messageId)).toEqual(['msg_1764547200_00000000000a'])
    expect(db.query<{ n: number }, []>(`SELECT count(*) AS n FROM messages`).get()!.n).toBe(2)
    db.close()
  })
})
