/**
 * Opening the relay's SQLite database: the pragmas, the migrations, and the two connections the relay
 * uses — a writer, used only inside units of work, and a reader for everything else, which in WAL mode
 * sees committed data only and never waits for the writer.
 */
import { Database, type Statement } from 'bun:sqlite'
import { migrate } from './migrate.ts'

/**
 * What an acknowledged write survives: `fsync` — a power loss or a kernel crash (each group commit's
 * WAL is synced before its units are answered, see wal-sync.ts); `process` — a crash of the process
 * (kill -9), not of the machine.
 */
export type Durability = 'fsync' | 'process'

/** The WAL is cut back to this size when it is reset after a checkpoint, so a burst does not keep its size. */
export const JOURNAL_SIZE_LIMIT_BYTES = 16 * 1024 * 1024

/**
 * Opens (creating if needed) a connection with the relay's pragmas. `busyTimeoutMs` 0 makes a locked
 * database an immediate SQLITE_BUSY (the relay retries on timers, never on the event loop); commands
 * that run beside a relay (`relay admin`, `relay backup`) pass a few seconds. synchronous=NORMAL in WAL
 * mode: a commit survives a crash of the process (kill -9); in `fsync` mode the relay syncs the WAL
 * itself after each group commit, off the event loop (wal-sync.ts), instead of synchronous=FULL,
 * which would sync on it.
 */
export function openConnection(path: string, busyTimeoutMs: number): Database {
  const db = trackStatements(new Database(path, { create: true, strict: true }))
  // WAL is switched on (once per file) under a generous timeout: another process may be writing
  db.run('PRAGMA busy_timeout = 5000')
  db.run('PRAGMA journal_mode = WAL')
  db.run(`PRAGMA busy_timeout = ${busyTimeoutMs}`)
  db.run('PRAGMA synchronous = NORMAL')
  db.run(`PRAGMA journal_size_limit = ${JOURNAL_SIZE_LIMIT_BYTES}`)
  db.run('PRAGMA foreign_keys = ON')
  db.run('PRAGMA temp_store = MEMORY')
  db.run('PRAGMA cache_size = -32000') // 32 MiB page cache
  db.run('PRAGMA mmap_size = 268435456')
  return db
}

/** Opens a database for a command beside (or instead of) a running relay, migrated to this version. */
export function openDatabase(path: string, busyTimeoutMs = 5000): Database {
  const db = openConnection(path, busyTimeoutMs)
  migrate(db)
  return db
}

/** The relay's connections: migrations applied on the writer first. */
export function openRelayDatabase(path: string): { writer: Database; reader: Database } {
  // start-up may wait for another process; serving never does
  const writer = openDatabase(path, 5000)
  writer.run('PRAGMA busy_timeout = 0')
  const reader = openConnection(path, 0)
  // No memory map on the reader. In WAL mode, a connection whose next read finds a commit made by another
  // drops its page cache and unmaps the whole file; the first read then maps it again and faults its
  // pages back in: 80–120 µs, paid by nearly every read under a steady trickle of writes (the ACL check
  // of each send, the poll after a message arrives). Without the map the same read costs 12–17 µs
  // (bench/sqlite-reader.ts).
  reader.run('PRAGMA mmap_size = 0')
  return { writer, reader }
}

const statements = new WeakMap<Database, Set<Statement>>()

/**
 * Remembers the statements prepared on `db`, so that `closeConnection` can finalize them. SQLite
 * keeps a connection (and its file descriptors) open until its last statement is finalized, which
 * otherwise waits for the garbage collector: a relay stopped in process would hold its files.
 */
function trackStatements(db: Database): Database {
  const prepared = new Set<Statement>()
  statements.set(db, prepared)
  const prepare = db.prepare.bind(db)
  db.prepare = ((sql: string, ...params: unknown[]) => {
    const statement = prepare(sql, ...(params as []))
    prepared.add(statement)
    return statement
  }) as Database['prepare']
  return db
}

/** Finalizes the statements prepared on `db`, then closes it: its files are released at once. */
export function closeConnection(db: Database): void {
  for (const statement of statements.get(db) ?? []) statement.finalize()
  statements.delete(db)
  db.close()
}
