/** Operator listings on the SQLite file (relay admin, /v1/admin): read-only, on the reader connection (errors mapped by the storage). */
import type { Database } from 'bun:sqlite'
import type { AgentRecord, AgentStatus } from '../../services/models/records.ts'
import type { AdminQueries, QueuedDelivery } from '../../services/ports.ts'
import { AGENT_COLUMNS } from './agents-store.ts'

export class SqliteAdminQueries implements AdminQueries {
  private readonly agentsStmt
  private readonly deliveriesStmt

  constructor(db: Database) {
    this.agentsStmt = db.prepare<AgentRecord, [number, string, string | null, number]>(
      `SELECT ${AGENT_COLUMNS} FROM agents
       WHERE (created_at > ?1 OR (created_at = ?1 AND public_key > ?2)) AND (?3 IS NULL OR status = ?3)
       ORDER BY created_at, public_key
       LIMIT ?4`,
    )
    this.deliveriesStmt = db.prepare<QueuedDelivery, [number]>(
      `SELECT delivery_id AS deliveryId, public_key AS publicKey, message_id AS messageId, state, attempts,
              next_attempt_at AS nextAttemptAt, last_error AS lastError, created_at AS createdAt
       FROM webhook_deliveries WHERE state IN ('pending', 'in_flight')
       ORDER BY next_attempt_at, delivery_id
       LIMIT ?`,
    )
  }

  async listAgents(opts: { status: AgentStatus | null; after: { createdAt: number; publicKey: string } | null; limit: number }): Promise<AgentRecord[]> {
    return this.agentsStmt.all(opts.after?.createdAt ?? -1, opts.after?.publicKey ?? '', opts.status, opts.limit)
  }

  async listQueuedDeliveries(limit: number): Promise<QueuedDelivery[]> {
    return this.deliveriesStmt.all(limit)
  }
}
