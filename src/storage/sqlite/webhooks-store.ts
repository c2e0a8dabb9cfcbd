import type { Database, Statement } from 'bun:sqlite'
import type { DueDelivery, WebhookRecord } from '../../services/models/records.ts'
import type { WebhookStore } from '../../services/ports.ts'

const WEBHOOK_COLUMNS = `public_key AS publicKey, url, secret, enabled, consecutive_failures AS consecutiveFailures,
  created_at AS createdAt, updated_at AS updatedAt`

type WebhookRow = Omit<WebhookRecord, 'enabled'> & { enabled: number }

/**
 * Webhook registrations and the durable delivery outbox on one connection. A delivery row lives while
 * the message waits for an attempt; it is removed when the webhook answers 2xx, when the message is
 * dropped for the webhook, and with the webhook. A claimed delivery is due again only when its lease
 * ends, so an attempt interrupted by a crash is made again after it.
 */
export class SqliteWebhookStore implements WebhookStore {
  private readonly findStmt: Statement<WebhookRow, [string]>
  private readonly upsertStmt: Statement<unknown, [string, string, string, number, number]>
  private readonly deleteStmt: Statement<unknown, [string]>
  private readonly deleteDeliveriesStmt: Statement<unknown, [string]>
  private readonly enabledStmt: Statement<{ one: number }, [string]>
  private readonly enqueueStmt: Statement<unknown, [string, string, string, number, number, number]>
  private readonly dueStmt: Statement<DueDelivery, [number, string, number]>
  private readonly leaseStmt: Statement<unknown, [number, number, string]>
  private readonly releaseStmt: Statement<unknown, [number, number, string]>
  private readonly voidLeasesStmt: Statement<unknown, [number]>
  private readonly failStmt: Statement<unknown, [number, number, string, number, string]>
  private readonly finishStmt: Statement<unknown, [string]>
  private readonly resetStmt: Statement<unknown, [number, string]>
  private readonly addFailureStmt: Statement<{ enabled: number; consecutiveFailures: number }, [number, number, string]>
  private readonly pendingStmt: Statement<{ n: number }, []>

  constructor(db: Database) {
    this.findStmt = db.prepare(`SELECT ${WEBHOOK_COLUMNS} FROM webhooks WHERE public_key = ?`)
    this.upsertStmt = db.prepare(`INSERT INTO webhooks (public_key, url, secret, enabled, consecutive_failures, created_at, updated_at)
      VALUES (?1, ?2, ?3, 1, 0, ?4, ?5)
      ON CONFLICT(public_key) DO UPDATE SET url = excluded.url, secret = excluded.secret, enabled = 1,
        consecutive_failures = 0, updated_at = excluded.updated_at`)
    this.deleteStmt = db.prepare(`DELETE FROM webhooks WHERE public_key = ?`)
    this.deleteDeliveriesStmt = db.prepare(`DELETE FROM webhook_deliveries WHERE public_key = ?`)
    this.enabledStmt = db.prepare(`SELECT 1 AS one FROM webhooks WHERE public_key = ? AND enabled = 1`)
    this.enqueueStmt = db.prepare(`INSERT OR IGNORE INTO webhook_deliveries
      (delivery_id, public_key, message_id, attempts, state, next_attempt_at, created_at, updated_at)
      VALUES (?1, ?2, ?3, 0, 'pending', ?4, ?5, ?6)`)
    // oldest due first; webhooks whose attempts are all taken are skipped in SQL, so a receiver with a
    // long queue cannot hide the deliveries of others behind it
    this.dueStmt = db.prepare(`SELECT d.delivery_id AS deliveryId, d.public_key AS publicKey, d.message_id AS messageId,
        d.attempts, w.url, w.secret, w.consecutive_failures AS consecutiveFailures
      FROM webhook_deliveries d JOIN webhooks w ON w.public_key = d.public_key
      WHERE d.state IN ('pending', 'in_flight') AND d.next_attempt_at <= ?1 AND w.enabled = 1
        AND d.public_key NOT IN (SELECT value FROM json_each(?2))
      ORDER BY d.next_attempt_at LIMIT ?3`)
    // a claim is marked in_flight until its outcome is written; its lease is next_attempt_at
    this.leaseStmt = db.prepare(`UPDATE webhook_deliveries SET state = 'in_flight', next_attempt_at = ?1, updated_at = ?2 WHERE delivery_id = ?3`)
    this.releaseStmt = db.prepare(`UPDATE webhook_deliveries SET state = 'pending', next_attempt_at = ?1, updated_at = ?2 WHERE delivery_id = ?3`)
    this.failStmt = db.prepare(`UPDATE webhook_deliveries SET state = 'pending', attempts = ?1, next_attempt_at = ?2, last_error = ?3, updated_at = ?4
      WHERE delivery_id = ?5`)
    this.voidLeasesStmt = db.prepare(`UPDATE webhook_deliveries SET state = 'pending', next_attempt_at = min(next_attempt_at, ?1) WHERE state = 'in_flight'`)
    this.finishStmt = db.prepare(`DELETE FROM webhook_deliveries WHERE delivery_id = ?`)
    this.resetStmt = db.prepare(`UPDATE webhooks SET consecutive_failures = 0, updated_at = ?1
      WHERE public_key = ?2 AND consecutive_failures <> 0`)
    this.addFailureStmt = db.prepare(`UPDATE webhooks SET consecutive_failures = consecutive_failures + 1,
        enabled = CASE WHEN consecutive_failures + 1 >= ?1 THEN 0 ELSE enabled END, updated_at = ?2
      WHERE public_key = ?3 RETURNING enabled, consecutive_failures AS consecutiveFailures`)
    this.pendingStmt = db.prepare(`SELECT count(*) AS n FROM webhook_deliveries WHERE state IN ('pending', 'in_flight')`)
  }

  async find(publicKey: string): Promise<WebhookRecord | null> {
    const row = this.findStmt.get(publicKey)
    return row ? { ...row, enabled: row.enabled === 1 } : null
  }

  async upsert(publicKey: string, url: string, secret: string, now: number): Promise<WebhookRecord> {
    this.upsertStmt.run(publicKey, url, secret, now, now)
    return (await this.find(publicKey)) as WebhookRecord
  }

  async delete(publicKey: string): Promise<boolean> {
    this.deleteDeliveriesStmt.run(publicKey)
    return this.deleteStmt.run(publicKey).changes > 0
  }

  async cancelDeliveries(publicKey: string): Promise<number> {
    return this.deleteDeliveriesStmt.run(publicKey).changes
  }

  async isEnabled(publicKey: string): Promise<boolean> {
    return this.enabledStmt.get(publicKey) !== null
  }

  async enqueue(deliveryId: string, publicKey: string, messageId: string, now: number): Promise<void> {
    this.enqueueStmt.run(deliveryId, publicKey, messageId, now, now, now)
  }

  async claimDue(now: number, exclude: readonly string[], limit: number, leaseUntil: number): Promise<DueDelivery[]> {
    const rows = this.dueStmt.all(now, JSON.stringify(exclude), limit)
    for (const r of rows) this.leaseStmt.run(leaseUntil, now, r.deliveryId)
    return rows
  }

  async release(deliveryId: string, dueAt: number): Promise<void> {
    this.releaseStmt.run(dueAt, dueAt, deliveryId)
  }

  /**
   * One process owns a SQLite database: claims left by the previous one (a crash) are void at start,
   * so their attempts are made again at once rather than when their lease ends.
   */
  voidLeases(now: number): number {
    return this.voidLeasesStmt.run(now).changes
  }

  async recordFailure(deliveryId: string, attempts: number, nextAttemptAt: number, error: string, now: number): Promise<void> {
    this.failStmt.run(attempts, nextAttemptAt, error.slice(0, 500), now, deliveryId)
  }

  async finish(deliveryId: string): Promise<void> {
    this.finishStmt.run(deliveryId)
  }

  async resetFailures(publicKey: string, now: number): Promise<void> {
    this.resetStmt.run(now, publicKey)
  }

  async addFailure(publicKey: string, disableAfter: number, now: number): Promise<{ enabled: boolean; consecutiveFailures: number } | null> {
    const row = this.addFailureStmt.get(disableAfter, now, publicKey)
    if (!row) return null
    if (row.enabled === 0) this.deleteDeliveriesStmt.run(publicKey)
    return { enabled: row.enabled === 1, consecutiveFailures: row.consecutiveFailures }
  }

  async pendingCount(): Promise<number> {
    return this.pendingStmt.get()?.n ?? 0
  }

  async removeFor(publicKey: string): Promise<void> {
    this.deleteDeliveriesStmt.run(publicKey)
    this.deleteStmt.run(publicKey)
  }
}
