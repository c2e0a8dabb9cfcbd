import { Database } from 'bun:sqlite'
import { drizzle, type BunSQLiteDatabase } from 'drizzle-orm/bun-sqlite'
import { migrate } from './migrate.ts'
import * as schema from './schema.ts'

export type Db = BunSQLiteDatabase<typeof schema> & { $client: Database }

/**
 * Opens (creating if needed) the relay database with its pragmas and applies migrations.
 * busy_timeout comes first so that switching to WAL waits for other processes (e.g. `relay admin`).
 * synchronous=NORMAL in WAL mode: a commit survives a crash of the process (kill -9); only a power
 * loss can take the last transactions.
 */
export function openDatabase(path: string): Db {
  const sqlite = new Database(path, { create: true, strict: true })
  sqlite.run('PRAGMA busy_timeout = 5000')
  sqlite.run('PRAGMA journal_mode = WAL')
  sqlite.run('PRAGMA synchronous = NORMAL')
  sqlite.run('PRAGMA foreign_keys = ON')
  sqlite.run('PRAGMA temp_store = MEMORY')
  sqlite.run('PRAGMA cache_size = -32000') // 32 MiB page cache
  sqlite.run('PRAGMA mmap_size = 268435456')
  migrate(sqlite)
  return drizzle({ client: sqlite, schema }) as Db
}
