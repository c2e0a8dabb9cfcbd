import type { Database, Statement } from 'bun:sqlite'
import type { Db } from './db.ts'
import type { webhooks } from './schema.ts'

export type WebhookRow = typeof webhooks.$inferSelect

/** A delivery whose next attempt is due, with what the attempt needs from its webhook. */
export interface DueDelivery {
  deliveryId: string
  publicKey: string
  messageId: string
  attempts: number
  url: string
  secret: string
  consecutiveFailures: number
}

const WEBHOOK_COLUMNS = `public_key AS publicKey, url, secret, enabled, consecutive_failures AS consecutiveFailures,
  created_at AS createdAt, updated_at AS updatedAt`

/**
 * Webhook registrations and the durable delivery outbox (SPEC §9). A delivery row lives while the
 * message waits for an attempt; it is removed when the webhook answers 2xx, when the message is dropped
 * for the webhook, and with the webhook. An attempt in flight is not written down: its row stays
 * `pending` and due, so a relay killed mid-attempt simply makes it again after a restart.
 */
export class WebhooksRepo {
  readonly client: Database
  private readonly findStmt: Statement<Omit<WebhookRow, 'enabled'> & { enabled: number }, [string]>
  private readonly upsertStmt: Statement<unknown, [string, string, string, number, number]>
  private readonly deleteStmt: Statement<unknown, [string]>
  private readonly deleteDeliveriesStmt: Statement<unknown, [string]>
  private readonly enabledStmt: Statement<{ one: number }, [string]>
  private readonly enqueueStmt: Statement<unknown, [string, string, string, number, number, number]>
  private readonly dueStmt: Statement<DueDelivery, [number, string, number]>
  private readonly failStmt: Statement<unknown, [number, number, string, number, string]>
  private readonly finishStmt: Statement<unknown, [string]>
  private readonly resetStmt: Statement<unknown, [number, string]>
  private readonly addFailureStmt: Statement<{ enabled: number; consecutiveFailures: number }, [number, number, string]>
  private readonly pendingStmt: Statement<{ n: number }, []>
  private readonly nextDueStmt: Statement<{ at: number | null }, []>

  constructor(db: Db) {
    const c = (this.client = db.$client)
    this.findStmt = c.prepare(`SELECT ${WEBHOOK_COLUMNS} FROM webhooks WHERE public_key = ?`)
    this.upsertStmt = c.prepare(`INSERT INTO webhooks (public_key, url, secret, enabled, consecutive_failures, created_at, updated_at)
      VALUES (?1, ?2, ?3, 1, 0, ?4, ?5)
      ON CONFLICT(public_key) DO UPDATE SET url = excluded.url, secret = excluded.secret, enabled = 1,
        consecutive_failures = 0, updated_at = excluded.updated_at`)
    this.deleteStmt = c.prepare(`DELETE FROM webhooks WHERE public_key = ?`)
    this.deleteDeliveriesStmt = c.prepare(`DELETE FROM webhook_deliveries WHERE public_key = ?`)
    this.enabledStmt = c.prepare(`SELECT 1 AS one FROM webhooks WHERE public_key = ? AND enabled = 1`)
    this.enqueueStmt = c.prepare(`INSERT OR IGNORE INTO webhook_deliveries
      (delivery_id, public_key, message_id, attempts, state, next_attempt_at, created_at, updated_at)
      VALUES (?1, ?2, ?3, 0, 'pending', ?4, ?5, ?6)`)
    // oldest due first; webhooks whose attempts are all taken are skipped in SQL, so a receiver with a
    // long queue cannot hide the deliveries of others behind it
    this.dueStmt = c.prepare(`SELECT d.delivery_id AS deliveryId, d.public_key AS publicKey, d.message_id AS messageId,
        d.attempts, w.url, w.secret, w.consecutive_failures AS consecutiveFailures
      FROM webhook_deliveries d JOIN webhooks w ON w.public_key = d.public_key
      WHERE d.state = 'pending' AND d.next_attempt_at <= ?1 AND w.enabled = 1
        AND d.public_key NOT IN (SELECT value FROM json_each(?2))
      ORDER BY d.next_attempt_at LIMIT ?3`)
    this.failStmt = c.prepare(`UPDATE webhook_deliveries SET attempts = ?1, next_attempt_at = ?2, last_error = ?3, updated_at = ?4
      WHERE delivery_id = ?5`)
    this.finishStmt = c.prepare(`DELETE FROM webhook_deliveries WHERE delivery_id = ?`)
    this.resetStmt = c.prepare(`UPDATE webhooks SET consecutive_failures = 0, updated_at = ?1
      WHERE public_key = ?2 AND consecutive_failures <> 0`)
    this.addFailureStmt = c.prepare(`UPDATE webhooks SET consecutive_failures = consecutive_failures + 1,
        enabled = CASE WHEN consecutive_failures + 1 >= ?1 THEN 0 ELSE enabled END, updated_at = ?2
      WHERE public_key = ?3 RETURNING enabled, consecutive_failures AS consecutiveFailures`)
    this.pendingStmt = c.prepare(`SELECT count(*) AS n FROM webhook_deliveries WHERE state IN ('pending', 'in_flight')`)
    this.nextDueStmt = c.prepare(`SELECT min(next_attempt_at) AS at FROM webhook_deliveries WHERE state = 'pending'`)
  }

  find(publicKey: string): WebhookRow | null {
    const row = this.findStmt.get(publicKey)
    return row ? { ...row, enabled: row.enabled === 1 } : null
  }

  /** Creates or replaces the webhook of `publicKey`: enabled, no failures, created_at kept on replace. */
  upsert(publicKey: string, url: string, secret: string, now: number): WebhookRow {
    this.upsertStmt.run(publicKey, url, secret, now, now)
    return this.find(publicKey) as WebhookRow
  }

  /** Removes the webhook and its pending deliveries; false when there was none. Call in a transaction. */
  delete(publicKey: string): boolean {
    this.deleteDeliveriesStmt.run(publicKey)
    return this.deleteStmt.run(publicKey).changes > 0
  }

  /** Removes the pending deliveries of one webhook (its agent was suspended); returns how many. */
  cancelDeliveries(publicKey: string): number {
    return this.deleteDeliveriesStmt.run(publicKey).changes
  }

  /** Whether new messages for `publicKey` get a delivery (an enabled webhook exists). */
  isEnabled(publicKey: string): boolean {
    return this.enabledStmt.get(publicKey) !== null
  }

  /** Queues the first attempt of one message for one webhook, due at `now`; a duplicate is ignored. */
  enqueue(deliveryId: string, publicKey: string, messageId: string, now: number): void {
    this.enqueueStmt.run(deliveryId, publicKey, messageId, now, now, now)
  }

  /** Pending deliveries due at `now`, oldest first, skipping the webhooks listed in `busy`. */
  due(now: number, busy: readonly string[], limit: number): DueDelivery[] {
    return this.dueStmt.all(now, JSON.stringify(busy), limit)
  }

  /** Records a failed attempt and when the next one is due. */
  recordFailure(deliveryId: string, attempts: number, nextAttemptAt: number, error: string, now: number): void {
    this.failStmt.run(attempts, nextAttemptAt, error.slice(0, 500), now, deliveryId)
  }

  /** Removes a delivery that is done (delivered, dropped or pointless). */
  finish(deliveryId: string): void {
    this.finishStmt.run(deliveryId)
  }

  /** A delivery succeeded: the webhook's run of failed messages is over. */
  resetFailures(publicKey: string, now: number): void {
    this.resetStmt.run(now, publicKey)
  }

  /**
   * A message was dropped for the webhook: one more consecutive failure, and the webhook is disabled
   * when that reaches `disableAfter` (its pending deliveries are then removed too). Null when the
   * webhook is gone.
   */
  addFailure(publicKey: string, disableAfter: number, now: number): { enabled: boolean; consecutiveFailures: number } | null {
    const row = this.addFailureStmt.get(disableAfter, now, publicKey)
    if (!row) return null
    if (row.enabled === 0) this.deleteDeliveriesStmt.run(publicKey)
    return { enabled: row.enabled === 1, consecutiveFailures: row.consecutiveFailures }
  }

  /** Deliveries waiting for an attempt (health, metrics). */
  pendingCount(): number {
    return this.pendingStmt.get()?.n ?? 0
  }

  /** When the earliest pending delivery is due; null when none waits. */
  nextDueAt(): number | null {
    return this.nextDueStmt.get()?.at ?? null
  }

  transaction<T>(fn: () => T): T {
    return this.client.transaction(fn).immediate()
  }
}
