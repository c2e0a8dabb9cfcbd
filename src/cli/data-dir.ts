import { Database } from 'bun:sqlite'
import { existsSync, readdirSync, readlinkSync, realpathSync } from 'node:fs'
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
  const paths = requireDatabase(config.dataDir)
  const client = new Database(paths.database, { readwrite: true, create: false, strict: true })
  client.run('PRAGMA busy_timeout = 5000')
  return { config, paths, client }
}

/**
 * The id of another process that has one of `files` open, or null. Read from /proc (Linux): a relay
 * keeps its database open for as long as it runs, and writes no pid file. Null where /proc is not
 * there (the caller's documentation then asks for the relay to be stopped first).
 */
export function processHolding(files: string[]): number | null {
  const wanted = new Set<string>()
  for (const f of files) {
    try {
      wanted.add(realpathSync(f))
    } catch {
      // not there: nobody holds it
    }
  }
  if (wanted.size === 0) return null
  let pids: string[]
  try {
    pids = readdirSync('/proc').filter((name) => /^\d+$/.test(name))
  } catch {
    return null
  }
  for (const pid of pids) {
    if (Number(pid) === process.pid) continue
    let fds: string[]
    try {
      fds = readdirSync(`/proc/${pid}/fd`)
    } catch {
      continue // gone, or not ours to see
    }
    for (const fd of fds) {
      try {
        if (wanted.has(readlinkSync(`/proc/${pid}/fd/${fd}`))) return Number(pid)
      } catch {
        // closed meanwhile
      }
    }
  }
  return null
}

/** The data directory's paths; throws when it holds no relay database (a mistyped path, not a new relay). */
export function requireDatabase(dataDir: string): ReturnType<typeof dataPaths> {
  const paths = dataPaths(dataDir)
  if (!existsSync(paths.database)) throw new Error(`no relay database at ${paths.database} (check --data-dir or RELAY_DATA_DIR)`)
  return paths
}
