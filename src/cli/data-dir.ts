import { Database } from 'bun:sqlite'
import { existsSync } from 'node:fs'
import type { Config } from '../config/config.ts'
import { loadConfig } from '../config/load.ts'
import { dataPaths } from '../relay.ts'

export interface ExistingDataDir {
  config: Config
  paths: ReturnType<typeof dataPaths>
  /** A plain connection: no migrations, nothing written, safe beside a running relay. */
  client: Database
}

/**
 * Opens the database of an existing data directory, found the way `serve` finds it (--data-dir,
 * RELAY_DATA_DIR, config), for commands that only read it (backup, stats). Unlike `serve` it never
 * creates the directory or applies migrations, so a mistyped path is an error rather than a new, empty
 * relay.
 */
export async function openExistingDataDir(flags: Record<string, string>): Promise<ExistingDataDir> {
  const config = await loadConfig({ flags })
  const paths = dataPaths(config.dataDir)
  if (!existsSync(paths.database)) {
    throw new Error(`no relay database at ${paths.database} (check --data-dir or RELAY_DATA_DIR)`)
  }
  const client = new Database(paths.database, { readwrite: true, create: false, strict: true })
  client.run('PRAGMA busy_timeout = 5000')
  return { config, paths, client }
}
