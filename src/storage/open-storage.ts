/**
 * Chooses and opens the storage a relay runs on, from the configuration: the embedded SQLite file in
 * the data directory (the default, one process), with in-process signals and connection counts; or,
 * when RELAY_DATABASE_URL names one, a PostgreSQL database shared by every instance of a cluster, with
 * LISTEN/NOTIFY signals and connection counts kept in the database.
 */
import type { Database } from 'bun:sqlite'
import type { Config } from '../config/config.ts'
import type { Clock } from '../lib/clock.ts'
import type { Logger } from '../lib/logger.ts'
import type { ConnectionRegistry, Signals, Storage } from '../services/ports.ts'
import { LocalConnectionRegistry } from './memory/connection-registry.ts'
import { LocalSignals } from './memory/signals.ts'
import { openPostgres } from './postgres/open-postgres.ts'
import { SqliteStorage } from './sqlite/sqlite-storage.ts'

export interface OpenedStorage {
  storage: Storage
  /** The SQLite writer connection when storage is SQLite (tests and tools inspect the file through it). */
  sqlite?: Database
  signals: Signals
  connections: ConnectionRegistry
}

/** `tool`: a command beside a running relay (relay admin), which takes over nothing the relay holds. */
export function openStorage(config: Config, paths: { database: string }, logger: Logger, clock: Clock, opts: { tool?: boolean } = {}): OpenedStorage {
  const lockWaitMs = opts.tool ? Math.max(config.database.lockWaitMs, 5000) : config.database.lockWaitMs
  const storage = new SqliteStorage({ path: paths.database, lockWaitMs, logger, now: clock.now(), tool: opts.tool, durability: config.database.durability })
  const signals = new LocalSignals((err) => logger.error('signal listener failed', { error: String(err) }))
  return { storage, signals, connections: new LocalConnectionRegistry(), sqlite: storage.writer }
}

/** `openStorage`, and PostgreSQL when RELAY_DATABASE_URL names a database (cluster mode). */
export async function openStorageAsync(config: Config, paths: { database: string }, logger: Logger, clock: Clock, opts: { tool?: boolean } = {}): Promise<OpenedStorage> {
  if (!config.database.url) return openStorage(config, paths, logger, clock, opts)
  const lockWaitMs = opts.tool ? Math.max(config.database.lockWaitMs, 5000) : config.database.lockWaitMs
  return openPostgres(config.database.url, { logger, clock, lockWaitMs, tool: opts.tool, poolSize: config.database.poolSize })
}
