import { Database } from 'bun:sqlite'
import { closeSync, existsSync, fsyncSync, linkSync, openSync, statSync, unlinkSync } from 'node:fs'
import { resolve } from 'node:path'
import { iso, systemClock } from '../lib/clock.ts'
import { UsageError } from './args.ts'
import { openExistingDataDir } from './data-dir.ts'
import { humanBytes } from './format.ts'

export const BACKUP_FLAGS = ['data-dir', 'config']
export const BACKUP_BOOLEANS = ['json']

/**
 * `relay backup FILE`: a consistent copy of the database while the relay serves (docs/protocol.md §13).
 *
 * `VACUUM INTO` on a connection of its own reads one snapshot (WAL readers never block the relay's
 * writers) and writes a compact, self-contained database (no -wal file to carry along). The copy is
 * written beside FILE under a temporary name, synced, then hard-linked into place, which fails if FILE
 * appeared meanwhile: an existing file is never overwritten and FILE is never half-written.
 */
export async function backup(positionals: string[], flags: Record<string, string>): Promise<void> {
  const [target, extra] = positionals
  if (!target || extra !== undefined) throw new UsageError('backup needs exactly one FILE to write')
  const out = resolve(target)
  if (existsSync(out)) throw new Error(`${out} already exists; not overwriting it`)
  const { client, paths } = await openExistingDataDir(flags)
  const tmp = `${out}.partial-${process.pid}`
  const startedAt = systemClock.now()
  try {
    try {
      // backups hold webhook secrets: owner-only from the first byte (VACUUM INTO accepts an empty file)
      closeSync(openSync(tmp, 'wx', 0o600))
      client.run('VACUUM INTO ?', [tmp])
    } catch (err) {
      throw new Error(`cannot write ${tmp}: ${(err as Error).message}`)
    } finally {
      client.close()
    }
    const fd = openSync(tmp, 'r+')
    fsyncSync(fd)
    closeSync(fd)
    const summary = verify(tmp)
    try {
      linkSync(tmp, out)
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code
      throw new Error(code === 'EEXIST' ? `${out} already exists; not overwriting it` : `cannot create ${out}: ${(err as Error).message}`)
    }
    const result = {
      file: out,
      size_bytes: statSync(out).size,
      taken_at: iso(startedAt),
      data_dir: paths.dataDir,
      blob_dir: paths.blobs,
      ...summary,
    }
    if (flags.json === 'true') {
      process.stdout.write(JSON.stringify(result, null, 2) + '\n')
      return
    }
    process.stdout.write(
      `wrote ${out} (${humanBytes(result.size_bytes)}: ${summary.agents} agents, ${summary.messages} messages, ${summary.blobs} blob records)\n` +
        `blob files are not in it: copy ${paths.blobs}/ after this (see README "Backup and restore")\n`,
    )
  } finally {
    if (existsSync(tmp)) unlinkSync(tmp)
  }
}

/** Opens the copy read-only, checks it, and counts what it holds. */
function verify(file: string): { agents: number; messages: number; blobs: number; migrations: number } {
  const db = new Database(file, { readonly: true, strict: true })
  try {
    const check = db.query<{ quick_check: string }, []>('PRAGMA quick_check').get()?.quick_check
    if (check !== 'ok') throw new Error(`the copy failed its integrity check: ${check}`)
    const count = (table: string) => db.query<{ n: number }, []>(`SELECT count(*) AS n FROM ${table}`).get()?.n ?? 0
    return { agents: count('agents'), messages: count('messages'), blobs: count('blobs'), migrations: count('__drizzle_migrations') }
  } finally {
    db.close()
  }
}
