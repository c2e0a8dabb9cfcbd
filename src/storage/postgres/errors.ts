/**
 * PostgreSQL's failures as the services know them: an unreachable, closed or overloaded database, a lock
 * or serialization conflict is `service_unavailable` (503 with Retry-After: the client may retry), a full
 * disk (SQLSTATE 53100) is `insufficient_storage` (507). Anything else (a constraint the code did not
 * expect, a bug) passes through and becomes a logged internal error.
 */
import { RelayError } from '../../errors.ts'

const unavailable = (why: string) => new RelayError('service_unavailable', why, null, { 'Retry-After': '1' })

/** SQLSTATE classes and codes that say "try again": connection trouble, shutdown, limits, conflicts. */
function retryable(state: string): boolean {
  if (state.startsWith('08')) return true // connection exception
  if (state.startsWith('57P')) return true // admin / crash shutdown, cannot connect now
  return state === '53300' || state === '53200' || state === '40001' || state === '40P01' || state === '55P03' || state === '57014'
}

export function mapPostgresError(err: unknown): unknown {
  if (err instanceof RelayError) return err
  const e = err as { code?: unknown; errno?: unknown }
  const state = typeof e?.errno === 'string' ? e.errno : null
  if (state === '53100') return new RelayError('insufficient_storage', 'The database is out of disk space; nothing was stored', null)
  if (state && retryable(state)) return unavailable('The database is busy or unavailable; retry shortly')
  const code = typeof e?.code === 'string' ? e.code : ''
  if (code.startsWith('ERR_POSTGRES_') && code !== 'ERR_POSTGRES_SERVER_ERROR' && !code.includes('SYNTAX') && !code.includes('INVALID')) {
    return unavailable('The database is unavailable; retry shortly')
  }
  if (err instanceof Error && /ECONNREFUSED|ECONNRESET|connection (closed|refused|timeout)|Failed to connect/i.test(err.message)) {
    return unavailable('The database is unavailable; retry shortly')
  }
  return err
}

/** A primary-key or unique-constraint violation (e.g. a message id drawn twice). */
export const isUniqueViolation = (err: unknown) => (err as { errno?: unknown })?.errno === '23505'
