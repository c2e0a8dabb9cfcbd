/**
 * Open WebSockets per agent counted over every instance (table ws_connections). Each instance refreshes
 * the heartbeat of its rows on a timer; rows whose heartbeat is older than three intervals belong to an
 * instance that died and no longer count (and are cleared). `tryAdd` is atomic per agent: it holds a
 * transaction-scoped advisory lock on the agent's key while it counts and inserts.
 *
 * Heartbeats are written and judged on the database's clock, never an instance's own: an instance whose
 * clock is off by minutes keeps its rows counted, and judges the others' rightly.
 *
 * Faults covered besides:
 * - an instance killed outright (kill -9) leaves rows with a fresh heartbeat, but its listening
 *   connection (named after the instance) is gone from the server at once, and rows of an instance
 *   without one do not count — unless the database server itself started less than three intervals
 *   ago (after a restart every instance is still reconnecting its link);
 * - a database outage stops every heartbeat: afterwards an instance counts every row, lapsed or not,
 *   and clears none, until it has reached the database for three intervals in a row — by then every
 *   live instance has beaten again. An instance cut off alone finds its rows cleared by the others,
 *   so its heartbeat writes them again from what it holds in memory.
 */
import type { SQL } from 'bun'
import type { Clock } from '../../lib/clock.ts'
import type { Logger } from '../../lib/logger.ts'
import type { ConnectionRegistry } from '../../services/ports.ts'
import { exec, one } from './db.ts'
import { mapPostgresError } from './errors.ts'

export const DEFAULT_HEARTBEAT_MS = 5_000

/** The database's clock, in milliseconds (what heartbeat_at holds). */
const DB_NOW_MS = '(extract(epoch from clock_timestamp()) * 1000)::bigint'
/** application_name of an instance's listening connection: this prefix, then the instance id. */
export const LINK_APPLICATION_PREFIX = 'relay-signals/'

export class PostgresConnectionRegistry implements ConnectionRegistry {
  private timer: ReturnType<typeof setInterval> | null = null
  private readonly staleMs: number
  /** This instance's registered connections: stored connection id → agent key. */
  private readonly mine = new Map<string, string>()
  /** Since when (performance.now()) every heartbeat has reached the database; null after one failed. */
  private reachableSince: number | null = performance.now()

  constructor(
    private readonly sql: SQL,
    readonly instanceId: string,
    private readonly clock: Clock,
    private readonly logger: Logger,
    readonly heartbeatMs: number = DEFAULT_HEARTBEAT_MS,
    /** After the database server starts, how long rows count without their instance's link (it reconnects meanwhile). */
    private readonly linkGraceMs: number = 3 * heartbeatMs,
  ) {
    this.staleMs = 3 * heartbeatMs
  }

  /** Starts the heartbeat timer. */
  start(): void {
    if (this.timer) return
    this.timer = setInterval(() => {
      this.heartbeat().catch((err) => this.logger.warn('connection heartbeat failed', { error: String(err) }))
    }, this.heartbeatMs)
    this.timer.unref?.()
  }

  /** Connection ids are unique within one instance only: stored, they carry the instance's id. */
  private rowId(connectionId: string): string {
    return `${this.instanceId}/${connectionId}`
  }

  /**
   * Whether lapsed heartbeats may be judged dead now: only once this instance has reached the database
   * for three intervals in a row (after an outage every instance needs a beat to catch up).
   */
  private judging(): boolean {
    return this.reachableSince !== null && performance.now() - this.reachableSince >= this.staleMs
  }

  /** `now` (the instance's clock) is not used: heartbeats are on the database's clock. */
  async tryAdd(publicKey: string, localId: string, limit: number, _now?: number): Promise<boolean> {
    const connectionId = this.rowId(localId)
    const judging = this.judging()
    try {
      return await this.sql.begin(async (tx) => {
        await exec(tx, 'SELECT pg_advisory_xact_lock(hashtext($1))', [`relay.ws:${publicKey}`])
        const row = await one<{ n: number }>(
          tx,
          `SELECT count(*)::int AS n FROM ws_connections c WHERE public_key = $1 AND NOT (connection_id = $3 AND instance_id = $4)
             AND (instance_id = $4 OR (
               (NOT $6::boolean OR heartbeat_at > ${DB_NOW_MS} - $2)
               AND (pg_postmaster_start_time() > clock_timestamp() - make_interval(secs => $7 / 1000.0)
                    OR EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.application_name = $5 || c.instance_id))))`,
          [publicKey, this.staleMs, connectionId, this.instanceId, LINK_APPLICATION_PREFIX, judging, this.linkGraceMs],
        )
        if ((row?.n ?? 0) >= limit) return false
        await exec(
          tx,
          `INSERT INTO ws_connections (public_key, connection_id, instance_id, heartbeat_at) VALUES ($1, $2, $3, ${DB_NOW_MS})
           ON CONFLICT (public_key, connection_id) DO UPDATE SET instance_id = excluded.instance_id, heartbeat_at = excluded.heartbeat_at`,
          [publicKey, connectionId, this.instanceId],
        )
        this.mine.set(connectionId, publicKey)
        return true
      })
    } catch (err) {
      throw mapPostgresError(err)
    }
  }

  async remove(publicKey: string, localId: string): Promise<void> {
    const connectionId = this.rowId(localId)
    this.mine.delete(connectionId)
    await exec(this.sql, 'DELETE FROM ws_connections WHERE public_key = $1 AND connection_id = $2 AND instance_id = $3', [
      publicKey,
      connectionId,
      this.instanceId,
    ]).catch((err) => Promise.reject(mapPostgresError(err)))
  }

  /** Keeps this instance's rows counted, and clears the rows of instances whose heartbeat lapsed. */
  async heartbeat(_now?: number): Promise<void> {
    try {
      const beating = await exec(this.sql, `UPDATE ws_connections SET heartbeat_at = ${DB_NOW_MS} WHERE instance_id = $1`, [this.instanceId])
      if (beating < this.mine.size) {
        // cleared by the others while this instance could not reach the database: written again
        const ids = [...this.mine.keys()]
        await exec(
          this.sql,
          `INSERT INTO ws_connections (public_key, connection_id, instance_id, heartbeat_at)
           SELECT k, c, $3, ${DB_NOW_MS} FROM unnest($1::text[], $2::text[]) AS t(k, c)
           ON CONFLICT (public_key, connection_id) DO UPDATE SET instance_id = excluded.instance_id, heartbeat_at = excluded.heartbeat_at`,
          [ids.map((id) => this.mine.get(id) as string), ids, this.instanceId],
        )
      }
      this.reachableSince ??= performance.now()
      if (this.judging()) {
        await exec(this.sql, `DELETE FROM ws_connections WHERE heartbeat_at <= ${DB_NOW_MS} - $1 AND instance_id <> $2`, [this.staleMs, this.instanceId])
      }
    } catch (err) {
      this.reachableSince = null
      throw mapPostgresError(err)
    }
  }

  /** Stops the heartbeat and forgets this instance's connections (they close with it). */
  async close(opts: { forget?: boolean } = {}): Promise<void> {
    if (this.timer) clearInterval(this.timer)
    this.timer = null
    this.mine.clear()
    if (opts.forget !== false) {
      await exec(this.sql, 'DELETE FROM ws_connections WHERE instance_id = $1', [this.instanceId]).catch((err) =>
        this.logger.warn('clearing connections at close failed', { error: String(err) }),
      )
    }
  }
}
