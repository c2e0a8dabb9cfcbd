import type { Database } from 'bun:sqlite'
import { statSync } from 'node:fs'
import type { RelayFigures } from '../../services/ports.ts'

type MessageCounts = Omit<RelayFigures['messages'], 'total'>

/**
 * Read-only figures about the whole relay for operators (`relay admin stats`, `relay admin agents`)
 * and for /metrics gauges computed at scrape time. Works on any connection to the database, including
 * one opened by another process while the relay serves.
 */
export class StatsRepo {
  constructor(
    private readonly client: Database,
    private readonly databasePath?: string,
  ) {}

  agentCounts(): RelayFigures['agents'] {
    const out = { active: 0, suspended: 0, total: 0 }
    for (const row of this.client.query<{ status: string; n: number }, []>('SELECT status, count(*) AS n FROM agents GROUP BY status').all()) {
      if (row.status === 'active' || row.status === 'suspended') out[row.status] = row.n
      out.total += row.n
    }
    return out
  }

  /**
   * Effective status at `now`: a `sent` message past `expires_at` counts as expired even before the
   * sweep marks it, and a delivered one past `expires_at` is already gone (docs/protocol.md §4.6).
   */
  messageCounts(now: number): MessageCounts {
    const row = this.client
      .query<{ sent: number | null; delivered: number | null; expired: number | null }, [number, number, number]>(
        `SELECT
           sum(status = 'sent' AND expires_at > ?) AS sent,
           sum(status = 'delivered' AND expires_at > ?) AS delivered,
           sum(status = 'expired' OR (status = 'sent' AND expires_at <= ?)) AS expired
         FROM messages`,
      )
      .get(now, now, now)
    return { sent: row?.sent ?? 0, delivered: row?.delivered ?? 0, expired: row?.expired ?? 0 }
  }

  blobCounts(now: number): RelayFigures['blobs'] {
    const live = this.client
      .query<{ n: number; bytes: number | null }, [number]>('SELECT count(*) AS n, sum(size_bytes) AS bytes FROM blobs WHERE expires_at > ?')
      .get(now)
    const stored = this.client
      .query<{ n: number; bytes: number | null }, []>(
        'SELECT count(*) AS n, sum(size) AS bytes FROM (SELECT hash, max(size_bytes) AS size FROM blobs GROUP BY hash)',
      )
      .get()
    return { records: live?.n ?? 0, bytes: live?.bytes ?? 0, stored_files: stored?.n ?? 0, stored_bytes: stored?.bytes ?? 0 }
  }

  webhookCounts(): RelayFigures['webhooks'] {
    const hooks = this.client
      .query<{ enabled: number | null; disabled: number | null }, []>('SELECT sum(enabled = 1) AS enabled, sum(enabled = 0) AS disabled FROM webhooks')
      .get()
    const pending = this.client
      .query<{ n: number }, []>(`SELECT count(*) AS n FROM webhook_deliveries WHERE state IN ('pending', 'in_flight')`)
      .get()
    return { enabled: hooks?.enabled ?? 0, disabled: hooks?.disabled ?? 0, pending_deliveries: pending?.n ?? 0 }
  }

  /** Size of the database file (pages in use) and of its write-ahead log. */
  databaseSize(): RelayFigures['database'] {
    const pages = this.client.query<{ page_count: number }, []>('PRAGMA page_count').get()?.page_count ?? 0
    const pageSize = this.client.query<{ page_size: number }, []>('PRAGMA page_size').get()?.page_size ?? 0
    let wal = 0
    if (this.databasePath) {
      try {
        wal = statSync(`${this.databasePath}-wal`).size
      } catch {
        // no WAL file: nothing written since the last checkpoint
      }
    }
    return { size_bytes: pages * pageSize, wal_bytes: wal }
  }

  all(now: number): RelayFigures {
    const messages = this.messageCounts(now)
    return {
      agents: this.agentCounts(),
      messages: { ...messages, total: messages.sent + messages.delivered + messages.expired },
      blobs: this.blobCounts(now),
      webhooks: this.webhookCounts(),
      database: this.databaseSize(),
    }
  }
}
