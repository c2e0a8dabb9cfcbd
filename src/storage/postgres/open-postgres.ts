/**
 * Opens cluster-mode storage: connects to PostgreSQL, applies the embedded migrations (once, however
 * many instances start together), and returns the storage with cross-instance signals and connection
 * counts. `storage.close()` stops both and ends the pool.
 */
import { SQL } from 'bun'
import { randomUUID } from 'node:crypto'
import type { Clock } from '../../lib/clock.ts'
import type { Logger } from '../../lib/logger.ts'
import type { OpenedStorage } from '../open-storage.ts'
import { LINK_APPLICATION_PREFIX, PostgresConnectionRegistry } from './connection-registry.ts'
import { readMigrateMark } from './migrate-mark.ts'
import { migrate } from './migrate.ts'
import { PostgresSignals } from './signals.ts'
import { PostgresStorage } from './postgres-storage.ts'

/** Connections an instance keeps for statements when not configured (see RELAY_DB_POOL_SIZE). */
export const DEFAULT_POOL_SIZE = 10

/** postgres://user@host:port/db — the URL without its password or parameters, for messages. */
export function describeDatabase(url: string): string {
  try {
    const u = new URL(url)
    const user = u.username ? `${decodeURIComponent(u.username)}@` : ''
    return `postgres://${user}${u.hostname}:${u.port || '5432'}${u.pathname || '/'}`
  } catch {
    return 'postgres://(unparsable URL)'
  }
}

function reason(err: unknown, url: string): string {
  const e = err as { message?: unknown; code?: unknown }
  let text = typeof e?.message === 'string' && e.message ? e.message : String(err)
  if (typeof e?.code === 'string' && !text.includes(e.code)) text = `${text} (${e.code})`
  try {
    const password = decodeURIComponent(new URL(url).password)
    if (password) text = text.split(password).join('***')
  } catch {
    // not a URL: nothing to hide
  }
  return text.replace(/\s+/g, ' ').trim()
}

/**
 * What an acknowledged write survives under PostgreSQL's `synchronous_commit` (read at start-up from
 * the relay's own connection, so per-role or per-database settings count), and whether that deserves a
 * warning.
 */
export function synchronousCommitPromise(setting: string): { level: 'info' | 'warn'; promise: string } {
  switch (setting) {
    case 'on':
    case 'remote_apply':
    case 'remote_write':
      return { level: 'info', promise: `a crash or power loss of the database server (each commit is flushed to its WAL before the answer${setting === 'on' ? '' : ', and written by the synchronous standbys if any are configured'})` }
    case 'local':
      return { level: 'info', promise: "a crash or power loss of the database server (flushed locally; synchronous standbys are not waited for)" }
    case 'off':
      return { level: 'warn', promise: 'a crash of a relay instance only: a crash of the database server may lose the last ~3 × wal_writer_delay (600 ms by default) of acknowledged commits; set synchronous_commit = on for the relay\'s role to make 201 mean on disk' }
    default:
      return { level: 'warn', promise: `unknown (synchronous_commit = ${setting})` }
  }
}

export async function openPostgres(
  url: string,
  opts: { logger: Logger; clock: Clock; lockWaitMs: number; tool?: boolean; heartbeatMs?: number; linkGraceMs?: number; signalProbeMs?: number; poolSize?: number },
): Promise<OpenedStorage> {
  const poolSize = opts.tool ? 2 : (opts.poolSize ?? DEFAULT_POOL_SIZE)
  const sql = new SQL({
    url,
    // statements; the signals open one connection more (RELAY_DB_POOL_SIZE)
    max: poolSize,
    connectionTimeout: 10,
    idleTimeout: 60,
    // a statement waiting on a row lock longer than this fails (mapped to 503 with Retry-After)
    connection: { lock_timeout: `${Math.max(1, Math.round(opts.lockWaitMs))}ms`, application_name: opts.tool ? 'relay-admin' : 'relay' },
  })
  try {
    await sql.unsafe('SELECT 1')
  } catch (err) {
    await sql.close().catch(() => {})
    throw new Error(`database ${describeDatabase(url)} is unreachable: ${reason(err, url)}`)
  }
  if (!opts.tool) {
    // what a 201 survives in cluster mode is the database's setting, not RELAY_DURABILITY's
    const setting = await sql.unsafe('SHOW synchronous_commit').then((rows: { synchronous_commit: string }[]) => rows[0]?.synchronous_commit ?? 'unknown', () => 'unknown')
    const { level, promise } = synchronousCommitPromise(setting)
    opts.logger[level]('database durability', { synchronous_commit: setting, a_201_survives: promise })
  }
  try {
    const applied = await migrate(sql)
    if (applied > 0) opts.logger.info('database migrated', { migrations: applied })
  } catch (err) {
    await sql.close().catch(() => {})
    throw new Error(`database ${describeDatabase(url)} could not be migrated: ${reason(err, url)}`)
  }
  if (!opts.tool) {
    const mark = await readMigrateMark(sql).catch(() => null)
    if (mark) {
      await sql.close().catch(() => {})
      throw new Error(
        `database ${describeDatabase(url)} holds an unfinished \`relay migrate\` (started ${mark.started_at} from ${mark.source}): run \`relay migrate --to …\` again with the same source to finish it, then start the relay`,
      )
    }
  }
  const instanceId = randomUUID()
  const connections = new PostgresConnectionRegistry(sql, instanceId, opts.clock, opts.logger, opts.heartbeatMs, opts.linkGraceMs)
  let signals: PostgresSignals | null = null
  const storage = new PostgresStorage(sql, {
    logger: opts.logger,
    onClose: [async () => signals?.close(), async () => connections.close()],
    linkProblem: () => signals?.problem ?? null,
    poolSize,
  })
  signals = new PostgresSignals(sql, instanceId, storage.messages, opts.logger, {
    // a connection of its own, which the signals replace when it stops hearing
    connectListener: () => new SQL({ url, max: 1, connectionTimeout: 10, idleTimeout: 0, connection: { application_name: `${LINK_APPLICATION_PREFIX}${instanceId}` } }),
    probeMs: opts.signalProbeMs,
  })
  if (!opts.tool) {
    try {
      await signals.start()
    } catch (err) {
      await storage.close().catch(() => {})
      throw new Error(`database ${describeDatabase(url)} is unreachable: ${reason(err, url)}`)
    }
    connections.start()
  }
  return { storage, signals, connections }
}
