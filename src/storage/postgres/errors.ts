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

/** Bun.SQL's own codes for a link to the server that failed, closed or timed out. */
const LINK_FAILURES = new Set([
  'ERR_POSTGRES_CONNECTION_CLOSED',
  'ERR_POSTGRES_CONNECTION_FAILED',
  'ERR_POSTGRES_CONNECTION_REFUSED',
  'ERR_POSTGRES_CONNECTION_TIMEOUT',
  'ERR_POSTGRES_IDLE_TIMEOUT',
  'ERR_POSTGRES_LIFETIME_TIMEOUT',
  'ERR_POSTGRES_QUERY_CANCELLED',
  'ERR_POSTGRES_TLS_UPGRADE_FAILED',
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
])

export function mapPostgresError(err: unknown): unknown {
  if (err instanceof RelayError) return err
  const e = err as { code?: unknown; errno?: unknown }
  const state = typeof e?.errno === 'string' ? e.errno : null
  if (state === '53100') return new RelayError('insufficient_storage', 'The database is out of disk space; nothing was stored', null)
  if (state && retryable(state)) return unavailable('The database is busy or unavailable; retry shortly')
  const code = typeof e?.code === 'string' ? e.code : ''
  if (LINK_FAILURES.has(code)) return unavailable('The database is unavailable; retry shortly')
  return err
}

/** A primary-key or unique-constraint violation (e.g. a message id drawn twice). */
export const isUniqueViolation = (err: unknown) => (err as { errno?: unknown })?.errno === '23505'
