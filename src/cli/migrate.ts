/**
 * `relay migrate --to postgres://… [--blobs s3://bucket/prefix]`: moves a single relay's data (its
 * SQLite database and, with --blobs, its blob bytes) into cluster storage, checks that everything
 * arrived, and prints what it did. The source is only read; the relay must be stopped while it runs.
 * Safe to run again: what the target already holds is left as it is.
 */
import { Database } from 'bun:sqlite'
import { SQL } from 'bun'
import { existsSync } from 'node:fs'
import { openBlobStore } from '../blobs/open-blob-store.ts'
import { s3StoreFromUrl } from '../blobs/s3/s3-blob-store.ts'
import type { Config } from '../config/config.ts'
import { loadConfig } from '../config/load.ts'
import { systemClock } from '../lib/clock.ts'
import { createLogger } from '../lib/logger.ts'
import { dataPaths } from '../relay.ts'
import { describeDatabase, openPostgres } from '../storage/postgres/open-postgres.ts'
import { MIGRATION_JOURNAL } from '../storage/sqlite/embedded-migrations.ts'
import { copyBlobs, type BlobsCopyResult } from '../storage/transfer/blob-copy.ts'
import { rebuildSearchWords } from '../storage/transfer/search-words.ts'
import { copyReplayLog, copyTables, DEFAULT_BATCH_ROWS, type TablesCopyResult } from '../storage/transfer/table-copy.ts'
import { replayLogPath } from '../storage/sqlite/replay-store.ts'
import { clearMigrateMark, setMigrateMark } from '../storage/postgres/migrate-mark.ts'
import { UsageError } from './args.ts'
import { processHolding } from './data-dir.ts'
import { humanBytes, table } from './format.ts'

export const MIGRATE_FLAGS = ['to', 'blobs', 'data-dir', 'config', 'batch']
export const MIGRATE_BOOLEANS = ['json']

/** Creates (migrates) the target schema the relay version running this command expects, then lets go of it. */
export type PrepareTarget = (url: string, config: Config) => Promise<void>

export interface MigrateDeps {
  prepareTarget: PrepareTarget
  env: Record<string, string | undefined>
  stdout: { write(s: string): unknown }
  stderr: { write(s: string): unknown }
}

export interface MigrationReport {
  ok: boolean
  source: { data_dir: string; database: string }
  target: { database: string; blobs: string | null }
  seconds: number
  tables: {
    table: string
    source_rows: number
    copied: number
    already_present: number
    refused: number
    target_rows: number
    missing: number
    maintained_by_target: boolean
  }[]
  /** Totals over the copied tables (not those the target keeps itself). */
  rows: { source: number; copied: number; already_present: number }
  skipped_tables: { table: string; reason: string }[]
  /** The target's search words, rebuilt for the copied agents (null when the target keeps none). */
  search_words: { agents: number; words: number } | null
  blobs: {
    copied_to: string | null
    /** Where the bytes are when they were not copied (no --blobs). */
    left_in: string | null
    contents: number
    bytes: number
    copied: number
    copied_bytes: number
    already_present: number
    /** How many wanted contents the source does not hold, and the first of them (at most 100). */
    missing_in_source: number
    missing_examples: string[]
    unreferenced_files: number
  }
  mismatches: string[]
}

/** The target's schema, created or brought up to date by the PostgreSQL storage's own migrations. */
export const prepareTarget: PrepareTarget = async (url, config) => {
  // migration notes go to stderr: stdout carries the report only
  const logger = createLogger('warn', (line) => process.stderr.write(line + '\n'))
  const opened = await openPostgres(url, { logger, clock: systemClock, lockWaitMs: Math.max(config.database.lockWaitMs, 5000), tool: true })
  await opened.storage.close()
}

/**
 * Refuses to read a database that was written by another relay version: its columns would not be
 * the ones this version's target schema has.
 */
function checkSourceVersion(source: Database): void {
  const last = source.query<{ created_at: number }, []>(`SELECT created_at FROM __drizzle_migrations ORDER BY created_at DESC LIMIT 1`).get()
  const known = MIGRATION_JOURNAL.entries.at(-1)!.when
  const applied = last ? Number(last.created_at) : 0
  if (applied < known) throw new Error('the relay database was written by an older relay: start this version on it once (it upgrades the database), stop it, then migrate')
  if (applied > known) throw new Error('the relay database was written by a newer relay: migrate with that version')
}

/** `relay migrate`: resolves with the exit code (0 when everything arrived, 1 when something did not). */
export async function migrate(positionals: string[], flags: Record<string, string>, deps: MigrateDeps): Promise<number> {
  if (positionals.length > 0) throw new UsageError(`migrate takes no arguments (got "${positionals[0]}")`)
  const to = flags.to
  if (!to) throw new UsageError('migrate needs --to postgres://user:password@host:5432/database')
  if (!/^postgres(ql)?:\/\//.test(to)) throw new UsageError('--to must be a postgres:// URL')
  if (flags.blobs !== undefined && !/^s3:\/\/[^/]+/.test(flags.blobs)) throw new UsageError('--blobs must be an s3://bucket/prefix URL')
  const batchRows = flags.batch === undefined ? DEFAULT_BATCH_ROWS : Number(flags.batch)
  if (!Number.isInteger(batchRows) || batchRows < 1 || batchRows > 5000) throw new UsageError('--batch must be a whole number from 1 to 5000')

  const startedAt = performance.now()
  const progress = (line: string) => void deps.stderr.write(`migrate: ${line}\n`)
  const config = await loadConfig({ flags, env: deps.env })
  const paths = dataPaths(config.dataDir)
  if (!existsSync(paths.database)) throw new Error(`no relay database at ${paths.database} (check --data-dir or RELAY_DATA_DIR)`)
  const holder = processHolding([paths.database, `${paths.database}-wal`, replayLogPath(paths.database)])
  if (holder !== null) throw new Error(`${paths.database} is open in process ${holder} (a relay still running?): stop the relay, then migrate`)

  // read-only: nothing about the source changes, and both passes below read one snapshot
  const source = new Database(paths.database, { readonly: true, strict: true })
  let target: SQL | null = null
  try {
    source.run('PRAGMA busy_timeout = 5000')
    checkSourceVersion(source)
    // both targets answer before anything is written to either
    const targetBlobs = flags.blobs === undefined ? null : s3StoreFromUrl(flags.blobs, deps.env, systemClock, {})
    if (targetBlobs) await targetBlobs.check()
    const targetName = describeDatabase(to)
    progress(`preparing ${targetName}`)
    await deps.prepareTarget(to, config)
    target = new SQL(to, { max: 2, idleTimeout: 0, connectionTimeout: 10 })
    await target.unsafe('SELECT 1').catch((err) => {
      throw new Error(`database ${targetName} is unreachable: ${(err as Error).message.split('\n')[0]}`)
    })
    const sourceBlobs = openBlobStore(config, paths, systemClock, deps.env)

    source.run('BEGIN')
    // instances refuse this database until a run has verified everything (then the mark goes)
    await setMigrateMark(target, { started_at: new Date().toISOString(), source: paths.database })
    progress(`copying ${paths.database} into ${targetName}`)
    const tables = await copyTables(source, target, { batchRows, progress })
    const replayed = await copyReplayLog(replayLogPath(paths.database), target, batchRows)
    if (replayed) progress(`replay window: ${replayed} recent signatures`)
    const words = await rebuildSearchWords(source, target)
    if (words) progress(`search words: ${words.words} new for ${words.agents} agents`)
    const wanted = wantedContents(source)
    progress(targetBlobs ? `copying ${wanted.size} blob contents into ${flags.blobs}` : `checking ${wanted.size} blob contents (bytes are not copied without --blobs)`)
    const blobs = await copyBlobs(sourceBlobs, targetBlobs, wanted, { progress })
    source.run('COMMIT')

    const report = buildReport({ paths, targetName, blobsUrl: flags.blobs ?? null, config, tables, words, blobs, seconds: (performance.now() - startedAt) / 1000 })
    deps.stdout.write(flags.json === 'true' ? JSON.stringify(report, null, 2) + '\n' : formatReport(report))
    if (!report.ok) {
      const [first] = report.mismatches
      deps.stderr.write(`relay: error: the target is missing what the source holds: ${first}${report.mismatches.length > 1 ? ` (and ${report.mismatches.length - 1} more)` : ''}\n`)
      deps.stderr.write('relay: relays refuse to start on the target until `relay migrate` verifies it complete\n')
      return 1
    }
    await clearMigrateMark(target)
    return 0
  } finally {
    source.close()
    await target?.close({ timeout: 5 }).catch(() => {})
  }
}

/** Contents the blob records want, with their sizes: named by a record, or claimed by an upload. */
function wantedContents(source: Database): Map<string, number> {
  const rows = source
    .query<{ hash: string; size: number }, []>(
      `SELECT hash, max(size_bytes) AS size FROM (
         SELECT hash, size_bytes FROM blobs UNION ALL SELECT hash, size_bytes FROM blob_contents WHERE state = 'live'
       ) GROUP BY hash`,
    )
    .all()
  return new Map(rows.map((r) => [r.hash, r.size]))
}

function buildReport(a: {
  paths: ReturnType<typeof dataPaths>
  targetName: string
  blobsUrl: string | null
  config: Config
  tables: TablesCopyResult
  words: { agents: number; words: number } | null
  blobs: BlobsCopyResult
  seconds: number
}): MigrationReport {
  const mismatches = [...a.tables.mismatches, ...a.blobs.mismatches]
  const copiedTables = a.tables.tables.filter((t) => !t.maintainedByTarget)
  return {
    ok: mismatches.length === 0,
    source: { data_dir: a.paths.dataDir, database: a.paths.database },
    target: { database: a.targetName, blobs: a.blobsUrl },
    seconds: Math.round(a.seconds * 1000) / 1000,
    tables: a.tables.tables.map((t) => ({
      table: t.table,
      source_rows: t.sourceRows,
      copied: t.inserted,
      already_present: t.present,
      refused: t.refused,
      target_rows: t.targetRows,
      missing: t.missing,
      maintained_by_target: t.maintainedByTarget ?? false,
    })),
    rows: {
      source: copiedTables.reduce((n, t) => n + t.sourceRows, 0),
      copied: copiedTables.reduce((n, t) => n + t.inserted, 0),
      already_present: copiedTables.reduce((n, t) => n + t.present, 0),
    },
    skipped_tables: a.tables.skipped,
    search_words: a.words,
    blobs: {
      copied_to: a.blobsUrl,
      left_in: a.blobsUrl ? null : (a.config.blobs.store || a.paths.blobs),
      contents: a.blobs.wanted,
      bytes: a.blobs.wantedBytes,
      copied: a.blobs.copied,
      copied_bytes: a.blobs.copiedBytes,
      already_present: a.blobs.present,
      missing_in_source: a.blobs.missingInSource.length,
      missing_examples: a.blobs.missingInSource.slice(0, 100),
      unreferenced_files: a.blobs.unreferenced,
    },
    mismatches,
  }
}

function formatReport(r: MigrationReport): string {
  const lines: string[] = []
  lines.push(`migrated ${r.source.database} into ${r.target.database} in ${r.seconds.toFixed(1)} s`)
  lines.push('')
  lines.push(
    table(
      ['table', 'source', 'copied', 'present', 'target'],
      r.tables.map((t) => [t.maintained_by_target ? `${t.table} (kept by the target)` : t.table, t.source_rows, t.maintained_by_target ? '-' : t.copied, t.maintained_by_target ? '-' : t.already_present, t.target_rows]),
    ).trimEnd(),
  )
  lines.push(`rows: ${r.rows.source} in the source, ${r.rows.copied} copied, ${r.rows.already_present} already there`)
  if (r.search_words) lines.push(`search words: rebuilt for ${r.search_words.agents} agents (${r.search_words.words} new)`)
  const skipped = new Map<string, string[]>()
  for (const s of r.skipped_tables) skipped.set(s.reason, [...(skipped.get(s.reason) ?? []), s.table])
  for (const [reason, names] of skipped) lines.push(`not copied: ${names.join(', ')} (${reason})`)
  lines.push('')
  const b = r.blobs
  if (b.copied_to) {
    lines.push(`blobs: ${b.contents} contents (${humanBytes(b.bytes)}) into ${b.copied_to}: ${b.copied} copied (${humanBytes(b.copied_bytes)}, SHA-256 checked), ${b.already_present} already there`)
  } else {
    lines.push(`blobs: bytes not copied (no --blobs): ${b.contents} contents (${humanBytes(b.bytes)}) stay in ${b.left_in}`)
    lines.push('       only their records moved; relays on the new database must use that blob store, or run again with --blobs s3://…')
  }
  if (b.missing_in_source > 0) lines.push(`warning: ${b.missing_in_source} content(s) named by blob records are not in the source blob store (e.g. ${b.missing_examples[0]}); those blobs were already unreadable`)
  if (b.unreferenced_files > 0) lines.push(`note: ${b.unreferenced_files} file(s) in the source blob store that no record names were left behind`)
  lines.push('')
  if (r.ok) lines.push('verified: every source row is in the target' + (b.copied_to ? ', every blob content is in the bucket' : ''))
  else for (const m of r.mismatches) lines.push(`MISMATCH ${m}`)
  return lines.join('\n') + '\n'
}
