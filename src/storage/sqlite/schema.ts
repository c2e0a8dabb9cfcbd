/**
 * The database schema. Times are integer milliseconds since the epoch; JSON documents are TEXT holding
 * the exact serialization the relay returns. Migrations in migrations/ are generated from this file
 * by drizzle-kit (`npm run db:generate`); a released migration is never edited.
 */
import { sql } from 'drizzle-orm'
import { index, integer, primaryKey, sqliteTable, text, uniqueIndex } from 'drizzle-orm/sqlite-core'

export const agents = sqliteTable(
  'agents',
  {
    publicKey: text('public_key').primaryKey(),
    displayName: text('display_name'),
    status: text('status', { enum: ['active', 'suspended'] }).notNull().default('active'),
    suspendedReason: text('suspended_reason'),
    visibility: text('visibility', { enum: ['public', 'private'] }).notNull().default('private'),
    inboxPolicy: text('inbox_policy', { enum: ['open', 'closed', 'allowlist', 'blocklist'] })
      .notNull()
      .default('blocklist'),
    metadata: text('metadata').notNull().default('{}'),
    capabilities: text('capabilities').notNull().default('[]'),
    createdAt: integer('created_at').notNull(),
    updatedAt: integer('updated_at').notNull(),
    lastActiveAt: integer('last_active_at').notNull(),
  },
  (t) => [
    // discovery: public active agents in the exact order of docs/protocol.md §3 (last_active_at desc, public_key);
    // display_name rides along so that a name search tests it in the index, not in the (large) table row
    index('agents_discover_idx').on(t.visibility, t.status, sql`${t.lastActiveAt} desc`, t.publicKey, t.displayName),
    // a running relay picks up operator suspensions by scanning recent changes
    index('agents_updated_idx').on(t.updatedAt),
  ],
)

/**
 * One row per (agent, tag), kept by triggers (migrations/0001, 0003) in the transaction of every
 * profile change. `listed` (public and active) and `last_active_at` are copies from the agent row, so a
 * tag search walks one index in the order of docs/protocol.md §3 and stops after a page.
 */
export const agentTags = sqliteTable(
  'agent_tags',
  {
    publicKey: text('public_key')
      .notNull()
      .references(() => agents.publicKey, { onDelete: 'cascade' }),
    tag: text('tag').notNull(),
    listed: integer('listed', { mode: 'boolean' }).notNull().default(false),
    lastActiveAt: integer('last_active_at').notNull().default(0),
  },
  (t) => [
    primaryKey({ columns: [t.publicKey, t.tag] }),
    index('agent_tags_listing_idx').on(t.tag, t.listed, sql`${t.lastActiveAt} desc`, t.publicKey),
  ],
)

/**
 * The capability catalog (docs/protocol.md §3): per tag, how many public active agents use it. Kept by triggers on
 * agent_tags, so `/v1/capabilities` reads a few rows instead of counting every tag of every agent.
 * A tag whose count reaches zero is removed.
 */
export const tagCounts = sqliteTable(
  'tag_counts',
  {
    tag: text('tag').primaryKey(),
    agentCount: integer('agent_count').notNull(),
  },
  (t) => [index('tag_counts_rank_idx').on(sql`${t.agentCount} desc`, t.tag)],
)

/**
 * Accepted signatures, appended in arrival order (docs/protocol.md §1.2 step 4). Append-only keeps each insert on
 * the last page of the table, so a group commit of many requests writes a page or two; the uniqueness
 * check runs against the same entries held in memory (loaded at start-up, so replays fail after a restart).
 * `signature` holds the first 22 characters (128 bits) of the signature, which identify it.
 */
export const replayLog = sqliteTable('replay_log', {
  id: integer('id').primaryKey(),
  signature: text('signature').notNull(),
  expiresAt: integer('expires_at').notNull(),
})

export const messages = sqliteTable(
  'messages',
  {
    messageId: text('message_id').primaryKey(),
    senderKey: text('sender_key').notNull(),
    recipientKey: text('recipient_key').notNull(),
    contentType: text('content_type').notNull(),
    /** Serialized JSON of `body`; null when absent or dropped at expiry. */
    body: text('body'),
    /** Serialized JSON array of attachments; null when none or dropped at expiry. */
    attachments: text('attachments'),
    threadId: text('thread_id'),
    inReplyTo: text('in_reply_to'),
    metadata: text('metadata'),
    status: text('status', { enum: ['sent', 'delivered', 'expired'] }).notNull(),
    createdAt: integer('created_at').notNull(),
    expiresAt: integer('expires_at').notNull(),
    deliveredAt: integer('delivered_at'),
  },
  (t) => [
    index('messages_inbox_idx').on(t.recipientKey, t.status, t.createdAt, t.messageId),
    // only messages in a thread are listed by thread: the others (most) stay out of this index
    index('messages_thread_idx').on(t.threadId, t.createdAt, t.messageId).where(sql`${t.threadId} IS NOT NULL`),
    // the expiry sweep walks expires_at; status is left out so that delivery (sent → delivered) never
    // moves an entry of this index: that would double the pages every poll writes
    index('messages_expires_idx').on(t.expiresAt),
  ],
)

/** Which unexpired messages attach which blobs: read access and the delete guard of docs/protocol.md §6. */
export const messageBlobs = sqliteTable(
  'message_blobs',
  {
    messageId: text('message_id')
      .notNull()
      .references(() => messages.messageId, { onDelete: 'cascade' }),
    blobId: text('blob_id').notNull(),
    expiresAt: integer('expires_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.messageId, t.blobId] }), index('message_blobs_blob_idx').on(t.blobId, t.expiresAt)],
)

export const aclEntries = sqliteTable(
  'acl_entries',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    ownerKey: text('owner_key').notNull(),
    peerKey: text('peer_key').notNull(),
    entryType: text('entry_type', { enum: ['allow', 'block'] }).notNull(),
    createdAt: integer('created_at').notNull(),
    updatedAt: integer('updated_at').notNull(),
  },
  (t) => [uniqueIndex('acl_owner_peer_idx').on(t.ownerKey, t.peerKey), index('acl_owner_created_idx').on(t.ownerKey, t.id)],
)

export const blobs = sqliteTable(
  'blobs',
  {
    blobId: text('blob_id').primaryKey(),
    ownerKey: text('owner_key').notNull(),
    hash: text('hash').notNull(),
    sizeBytes: integer('size_bytes').notNull(),
    contentType: text('content_type').notNull(),
    createdAt: integer('created_at').notNull(),
    expiresAt: integer('expires_at').notNull(),
  },
  (t) => [
    index('blobs_owner_hash_idx').on(t.ownerKey, t.hash),
    index('blobs_hash_idx').on(t.hash),
    index('blobs_expires_idx').on(t.expiresAt),
  ],
)

export const webhooks = sqliteTable('webhooks', {
  publicKey: text('public_key').primaryKey(),
  url: text('url').notNull(),
  /** base64url of the 32-byte HMAC key; never returned by the API. */
  secret: text('secret').notNull(),
  enabled: integer('enabled', { mode: 'boolean' }).notNull().default(true),
  consecutiveFailures: integer('consecutive_failures').notNull().default(0),
  createdAt: integer('created_at').notNull(),
  updatedAt: integer('updated_at').notNull(),
})

/** The durable webhook outbox: one row per message per webhook, attempts counted on it. */
export const webhookDeliveries = sqliteTable(
  'webhook_deliveries',
  {
    deliveryId: text('delivery_id').primaryKey(),
    publicKey: text('public_key').notNull(),
    messageId: text('message_id').notNull(),
    attempts: integer('attempts').notNull().default(0),
    state: text('state', { enum: ['pending', 'in_flight', 'succeeded', 'dropped'] }).notNull(),
    nextAttemptAt: integer('next_attempt_at').notNull(),
    lastError: text('last_error'),
    createdAt: integer('created_at').notNull(),
    updatedAt: integer('updated_at').notNull(),
  },
  (t) => [
    uniqueIndex('webhook_deliveries_message_idx').on(t.messageId, t.publicKey),
    index('webhook_deliveries_due_idx').on(t.state, t.nextAttemptAt),
    index('webhook_deliveries_agent_idx').on(t.publicKey),
  ],
)

/** Small key/value store for relay-wide facts (e.g. the message sequence high-water mark). */
export const relayState = sqliteTable('relay_state', {
  key: text('key').primaryKey(),
  value: text('value').notNull(),
})


/**
 * Which contents (SHA-256) may hold bytes in the blob store, and who may remove them. An upload claims
 * its content here before placing the bytes; cleanup marks a content `deleting` — only when no record
 * names it and it was not claimed within the grace period — before it removes the bytes, and forgets it
 * after. An upload that finds the mark waits for the cleanup to finish, so bytes a record needs are never
 * removed, however many relays share the store.
 */
export const blobContents = sqliteTable('blob_contents', {
  hash: text('hash').primaryKey(),
  sizeBytes: integer('size_bytes').notNull(),
  state: text('state', { enum: ['live', 'deleting'] }).notNull().default('live'),
  claimedAt: integer('claimed_at').notNull(),
  updatedAt: integer('updated_at').notNull(),
})

/** Keys the operator admitted (`relay admin allow`); what the allowlist admission mode lets in. */
export const admittedKeys = sqliteTable('admitted_keys', {
  publicKey: text('public_key').primaryKey(),
  note: text('note'),
  createdAt: integer('created_at').notNull(),
})
