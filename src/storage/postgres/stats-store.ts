import type { RelayFigures, StatsStore } from '../../services/ports.ts'
import { one, type Db } from './db.ts'

/** Figures about the whole relay for operators, read on demand; the database size is pg_database_size. */
export class PgStatsStore implements StatsStore {
  constructor(private readonly db: Db) {}

  async figures(now: number): Promise<RelayFigures> {
    const row = await one<Record<string, number | null>>(
      this.db,
      `SELECT
         (SELECT count(*) FROM agents WHERE status = 'active')::float8 AS agents_active,
         (SELECT count(*) FROM agents WHERE status = 'suspended')::float8 AS agents_suspended,
         (SELECT count(*) FROM agents)::float8 AS agents_total,
         (SELECT count(*) FROM messages WHERE status = 'sent' AND expires_at > $1)::float8 AS sent,
         (SELECT count(*) FROM messages WHERE status = 'delivered' AND expires_at > $1)::float8 AS delivered,
         (SELECT count(*) FROM messages WHERE status = 'expired' OR (status = 'sent' AND expires_at <= $1))::float8 AS expired,
         (SELECT count(*) FROM blobs WHERE expires_at > $1)::float8 AS blob_records,
         (SELECT sum(size_bytes) FROM blobs WHERE expires_at > $1)::float8 AS blob_bytes,
         (SELECT count(*) FROM (SELECT 1 FROM blobs GROUP BY hash) s)::float8 AS stored_files,
         (SELECT sum(size) FROM (SELECT max(size_bytes) AS size FROM blobs GROUP BY hash) s)::float8 AS stored_bytes,
         (SELECT count(*) FROM webhooks WHERE enabled)::float8 AS hooks_enabled,
         (SELECT count(*) FROM webhooks WHERE NOT enabled)::float8 AS hooks_disabled,
         (SELECT count(*) FROM webhook_deliveries WHERE state IN ('pending', 'in_flight'))::float8 AS pending,
         pg_database_size(current_database())::float8 AS size_bytes`,
      [now],
    )
    const n = (k: string) => Number(row?.[k] ?? 0)
    const messages = { sent: n('sent'), delivered: n('delivered'), expired: n('expired') }
    return {
      agents: { active: n('agents_active'), suspended: n('agents_suspended'), total: n('agents_total') },
      messages: { ...messages, total: messages.sent + messages.delivered + messages.expired },
      blobs: { records: n('blob_records'), bytes: n('blob_bytes'), stored_files: n('stored_files'), stored_bytes: n('stored_bytes') },
      webhooks: { enabled: n('hooks_enabled'), disabled: n('hooks_disabled'), pending_deliveries: n('pending') },
      database: { size_bytes: n('size_bytes'), wal_bytes: 0 },
    }
  }
}
