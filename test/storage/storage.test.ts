import { describe, expect, test } from 'bun:test'
import { readdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { MIGRATION_JOURNAL, MIGRATION_SQL } from '../../src/storage/sqlite/embedded-migrations.ts'
import { openDatabase } from '../../src/storage/sqlite/database.ts'
import { prepareDataDir } from '../../src/relay.ts'
import { tempDir } from '../support/harness.ts'

describe('storage', () => {
  test('every migration in the journal and in migrations/ is embedded', () => {
    const files = readdirSync(join(import.meta.dir, '../../migrations/sqlite')).filter((f) => f.endsWith('.sql')).map((f) => f.replace(/\.sql$/, ''))
    expect(Object.keys(MIGRATION_SQL).sort()).toEqual(files.sort())
    expect(MIGRATION_JOURNAL.entries.map((e) => e.tag).sort()).toEqual(files.sort())
  })

  test('a new database gets WAL, synchronous=NORMAL, foreign keys; migrations apply once', () => {
    const dir = tempDir()
    const c = openDatabase(join(dir, 'relay.db'))
    expect((c.query('PRAGMA journal_mode').get() as any).journal_mode).toBe('wal')
    expect((c.query('PRAGMA synchronous').get() as any).synchronous).toBe(1)
    expect((c.query('PRAGMA foreign_keys').get() as any).foreign_keys).toBe(1)
    expect((c.query('PRAGMA busy_timeout').get() as any).timeout).toBe(5000)
    const applied = (c.query('SELECT count(*) AS n FROM __drizzle_migrations').get() as any).n
    expect(applied).toBe(MIGRATION_JOURNAL.entries.length)
    c.close()
    const again = openDatabase(join(dir, 'relay.db'))
    expect((again.query('SELECT count(*) AS n FROM __drizzle_migrations').get() as any).n).toBe(applied)
    again.close()
    rmSync(dir, { recursive: true })
  })

  test('a data directory that cannot be created is reported in one line', () => {
    const dir = tempDir()
    writeFileSync(join(dir, 'file'), 'x')
    expect(() => prepareDataDir(join(dir, 'file', 'data'))).toThrow(/data directory .* is not usable/)
    rmSync(dir, { recursive: true })
  })
})
