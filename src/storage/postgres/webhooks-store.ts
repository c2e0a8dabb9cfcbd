import type { DueDelivery, WebhookRecord } from '../../services/models/records.ts'
import type { WebhookStore } from '../../services/ports.ts'
import { exec, one, rows, type Db } from './db.ts'

const WEBHOOK_COLUMNS = `public_key AS "publicKey", url, secret, enabled, consecutive_failures AS "consecutiveFailures",
  created_at::float8 AS "createdAt", updated_at::float8 AS "updatedAt"`

/**
 * Webhook registrations and the durable delivery outbox, shared by every instance. A claim locks the due
 * rows (`FOR UPDATE SKIP LOCKED`, so concurrent claimers take disjoint deliveries) and moves them to
 * `in_flight` until `leaseUntil`; an attempt that never reports (a crashed instance) is due again after it.
 */
export class PgWebhookStore implements WebhookStore {
  constructor(private readonly db: Db) {}

  async find(publicKey: string): Promise<WebhookRecord | null> {
    return one<WebhookRecord>(this.db, `SELECT ${WEBHOOK_COLUMNS} FROM webhooks WHERE public_key = $1`, [publicKey])
  }

  async upsert(publicKey: string, url: string, secret: string, now: number): Promise<WebhookRecord> {
    return (await one<WebhookRecord>(
      this.db,
      `INSERT INTO webhooks (public_key, url, secret, enabled, consecutive_failures, created_at, updated_at)
       VALUES ($1, $2, $3, true, 0, $4, $4)
       ON CONFLICT (public_key) DO UPDATE SET url = excluded.url, secret = excluded.secret, enabled = true,
         consecutive_failures = 0, updated_at = excluded.updated_at
       RETURNING ${WEBHOOK_COLUMNS}`,
      [publicKey, url, secret, now],
    )) as WebhookRecord
  }

  async delete(publicKey: string): Promise<boolean> {
    await this.cancelDeliveries(publicKey)
    return (await exec(this.db, `DELETE FROM webhooks WHERE public_key = $1`, [publicKey])) > 0
  }

  async cancelDeliveries(publicKey: string): Promise<number> {
    return exec(this.db, `DELETE FROM webhook_deliveries WHERE public_key = $1`, [publicKey])
  }

  async isEnabled(publicKey: string): Promise<boolean> {
    return (await one(this.db, `SELECT 1 AS one FROM webhooks WHERE public_key = $1 AND enabled`, [publicKey])) !== null
  }

  async enqueue(deliveryId: string, publicKey: string, messageId: string, now: number): Promise<void> {
    await exec(
      this.db,
      `INSERT INTO webhook_deliveries (delivery_id, public_key, message_id, attempts, state, next_attempt_at, created_at, updated_at)
       VALUES ($1, $2, $3, 0, 'pending', $4, $4, $4) ON CONFLICT DO NOTHING`,
      [deliveryId, publicKey, messageId, now],
    )
  }

  async claimDue(now: number, exclude: readonly string[], limit: number, leaseUntil: number): Promise<DueDelivery[]> {
    const due = await rows<DueDelivery>(
      this.db,
      `SELECT d.delivery_id AS "deliveryId", d.public_key AS "publicKey", d.message_id AS "messageId",
         d.attempts, w.url, w.secret, w.consecutive_failures AS "consecutiveFailures"
       FROM webhook_deliveries d JOIN webhooks w ON w.public_key = d.public_key
       WHERE d.state IN ('pending', 'in_flight') AND d.next_attempt_at <= $1 AND w.enabled
         AND NOT (d.public_key = ANY($2::text[]))
       ORDER BY d.next_attempt_at LIMIT $3
       FOR UPDATE OF d SKIP LOCKED`,
      [now, [...exclude], limit],
    )
    if (due.length) {
      await exec(this.db, `UPDATE webhook_deliveries SET state = 'in_flight', next_attempt_at = $1, updated_at = $2 WHERE delivery_id = ANY($3::text[])`, [
        leaseUntil,
        now,
        due.map((d) => d.deliveryId),
      ])
    }
    return due
  }

  async release(deliveryId: string, dueAt: number): Promise<void> {
    await exec(this.db, `UPDATE webhook_deliveries SET state = 'pending', next_attempt_at = $1, updated_at = $1 WHERE delivery_id = $2`, [dueAt, deliveryId])
  }

  async recordFailure(deliveryId: string, attempts: number, nextAttemptAt: number, error: string, now: number): Promise<void> {
    await exec(
      this.db,
      `UPDATE webhook_deliveries SET state = 'pending', attempts = $1, next_attempt_at = $2, last_error = $3, updated_at = $4 WHERE delivery_id = $5`,
      [attempts, nextAttemptAt, error.slice(0, 500), now, deliveryId],
    )
  }

  async finish(deliveryId: string): Promise<void> {
    await exec(this.db, `DELETE FROM webhook_deliveries WHERE delivery_id = $1`, [deliveryId])
  }

  async resetFailures(publicKey: string, now: number): Promise<void> {
    await exec(this.db, `UPDATE webhooks SET consecutive_failures = 0, updated_at = $1 WHERE public_key = $2 AND consecutive_failures <> 0`, [now, publicKey])
  }

  async addFailure(publicKey: string, disableAfter: number, now: number): Promise<{ enabled: boolean; consecutiveFailures: number } | null> {
    const row = await one<{ enabled: boolean; consecutiveFailures: number }>(
      this.db,
      `UPDATE webhooks SET consecutive_failures = consecutive_failures + 1,
         enabled = CASE WHEN consecutive_failures + 1 >= $1 THEN false ELSE enabled END, updated_at = $2
       WHERE public_key = $3 RETURNING enabled, consecutive_failures AS "consecutiveFailures"`,
      [disableAfter, now, publicKey],
    )
    if (!row) return null
    if (!row.enabled) await this.cancelDeliveries(publicKey)
    return { enabled: row.enabled, consecutiveFailures: row.consecutiveFailures }
  }

  async pendingCount(): Promise<number> {
    return (await one<{ n: number }>(this.db, `SELECT count(*)::int AS n FROM webhook_deliveries WHERE state IN ('pending', 'in_flight')`))?.n ?? 0
  }

  async removeFor(publicKey: string): Promise<void> {
    await this.cancelDeliveries(publicKey)
    await exec(this.db, `DELETE FROM webhooks WHERE public_key = $1`, [publicKey])
  }
}
