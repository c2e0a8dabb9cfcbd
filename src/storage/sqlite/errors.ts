/**
 * SQLite's failures as the services know them: a locked database is `service_unavailable` (503 with
 * Retry-After: the client may simply retry), a full disk is `insufficient_storage` (507), a failing
 * disk is `service_unavailable`. Anything else (a constraint the code did not expect, a bug) passes
 * through and becomes a logged internal error.
 */
import { RelayError } from '../../errors.ts'

/** The SQLite result code of an error (`SQLITE_BUSY_SNAPSHOT` → `SQLITE_BUSY`), or null when it is not one. */
export function sqliteCode(err: unknown): string | null {
  const code = (err as { code?: unknown })?.code
  if (typeof code !== 'string' || !code.startsWith('SQLITE_')) return null
  const second = code.indexOf('_', 7)
  return second < 0 ? code : code.slice(0, second)
}

export const databaseBusy = () =>
  new RelayError('service_unavailable', 'The database is busy; retry shortly', null, { 'Retry-After': '1' })

export function mapSqliteError(err: unknown): unknown {
  if (err instanceof RelayError) return err
  switch (sqliteCode(err)) {
    case 'SQLITE_BUSY':
    case 'SQLITE_LOCKED':
      return databaseBusy()
    case 'SQLITE_FULL':
      return new RelayError('insufficient_storage', 'The relay is out of disk space; nothing was stored', null)
    case 'SQLITE_IOERR':
    case 'SQLITE_CANTOPEN':
    case 'SQLITE_READONLY':
    case 'SQLITE_PROTOCOL':
      return new RelayError('service_unavailable', 'Storage is unavailable; retry later', null, { 'Retry-After': '5' })
    default:
      return err
  }
}

/** A primary-key or unique-constraint violation (e.g. a message id drawn twice). */
export const isUniqueViolation = (err: unknown) => {
  const code = (err as { code?: unknown })?.code
  return code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || code === 'SQLITE_CONSTRAINT_UNIQUE'
}
