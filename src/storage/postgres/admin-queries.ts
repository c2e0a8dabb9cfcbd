/** Operator listings on PostgreSQL (relay admin, /v1/admin): read-only, on the pool. */
import type { AgentRecord, AgentStatus } from '../../services/models/records.ts'
import type { AdminQueries, QueuedDelivery } from '../../services/ports.ts'
import { AGENT_COLUMNS } from './agents-store.ts'
import { rows, type Db } from './db.ts'

export class PgAdminQueries implements AdminQueries {
  constructor(private readonly db: Db) {}

  async listAgents(opts: { status: AgentStatus | null; after: { createdAt: number; publicKey: string } | null; limit: number }): Promise<AgentRecord[]> {
    const params: unknown[] = [opts.after?.createdAt ?? -1, opts.after?.publicKey ?? '', opts.limit]
    const byStatus = opts.status === null ? '' : `AND status = $${params.push(opts.status)}`
    return rows<AgentRecord>(
      this.db,
      `SELECT ${AGENT_COLUMNS} FROM agents
       WHERE (created_at, public_key) > ($1::bigint, $2::text) ${byStatus}
       ORDER BY created_at, public_key LIMIT $3`,
      params,
    )
  }

  async listQueuedDeliveries(limit: number): Promise<QueuedDelivery[]> {
    return rows<QueuedDelivery>(
      this.db,
      `SELECT delivery_id AS "deliveryId", public_key AS "publicKey", message_id AS "messageId", state, attempts,
         next_attempt_at::float8 AS "nextAttemptAt", last_error AS "lastError", created_at::float8 AS "createdAt"
       FROM webhook_deliveries WHERE state IN ('pending', 'in_flight')
       ORDER BY next_attempt_at, delivery_id COLLATE "C" LIMIT $1`,
      [limit],
    )
  }
}
