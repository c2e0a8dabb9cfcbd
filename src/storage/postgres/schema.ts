/**
 * The PostgreSQL schema (cluster mode), table by table and column by column the schema of
 * storage/sqlite/schema.ts: times are integer milliseconds (bigint), JSON documents are TEXT holding the
 * exact serialization the relay returns. Plus what several instances sharing one database need: rate
 * events, open WebSockets per instance, and the words of discovery's text search (SQLite's FTS5 table).
 * Migrations in migrations/postgres/ are generated from this file by drizzle-kit
 * (`npx drizzle-kit generate --config drizzle.postgres.config.ts`); the triggers that keep agent_tags and
 * tag_counts, and the byte-order ("C") collation of the keys that order lists, are a custom migration.
 * A released migration is never edited.
 */
import { sql } from 'drizzle-orm'
import { bigint, bigserial, boolean, index, integer, pgTable, primaryKey, serial, text, uniqueIndex } from 'drizzle-orm/pg-core'

const ms = (name: string) => bigint(name, { mode: 'number' })

export const agents = pgTable(
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
    createdAt: ms('created_at').notNull(),
    updatedAt: ms('updated_at').notNull(),
    lastActiveAt: ms('last_active_at').notNull(),
  },
  (t) => [
    index('agents_discover_idx').on(t.visibility, t.status, sql`${t.lastActiveAt} desc`, t.publicKey),
    index('agents_updated_idx').on(t.updatedAt),
  ],
)

/** One row per (agent, tag), kept by triggers (custom migration) in the transaction of every profile change. */
export const agentTags = pgTable(
  'agent_tags',
  {
    publicKey: text('public_key')
      .notNull()
      .references(() => agents.publicKey, { onDelete: 'cascade' }),
    tag: text('tag').notNull(),
    listed: boolean('listed').notNull().default(false),
    lastActiveAt: ms('last_active_at').notNull().default(0),
  },
  (t) => [
    primaryKey({ columns: [t.publicKey, t.tag] }),
    index('agent_tags_listing_idx').on(t.tag, t.listed, sql`${t.lastActiveAt} desc`, t.publicKey),
  ],
)

/** Per tag, how many public active agents use it; kept by triggers on agent_tags. */
export const tagCounts = pgTable(
  'tag_counts',
  {
    tag: text('tag').primaryKey(),
    agentCount: integer('agent_count').notNull(),
  },
  (t) => [index('tag_counts_rank_idx').on(sql`${t.agentCount} desc`, t.tag)],
)

/**
 * The words of an agent's display name and capability names and descriptions, folded the way SQLite's
 * FTS5 unicode61 tokenizer folds them (lower case, no diacritics): what a text search matches by prefix.
 * Written by the agent store in the transaction of the profile change.
 */
export const agentWords = pgTable(
  'agent_words',
  {
    publicKey: text('public_key')
      .notNull()
      .references(() => agents.publicKey, { onDelete: 'cascade' }),
    word: text('word').notNull(),
  },
  (t) => [primaryKey({ columns: [t.publicKey, t.word] }), index('agent_words_word_idx').on(t.word, t.publicKey)],
)

/** Accepted signatures (their first 128 bits) until they expire: a second insert of one is a replay. */
export const replayLog = pgTable(
  'replay_log',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    signature: text('signature').notNull(),
    expiresAt: ms('expires_at').notNull(),
  },
  (t) => [uniqueIndex('replay_log_signature_idx').on(t.signature), index('replay_log_expires_idx').on(t.expiresAt)],
)

export const messages = pgTable(
  'messages',
  {
    messageId: text('message_id').primaryKey(),
    senderKey: text('sender_key').notNull(),
    recipientKey: text('recipient_key').notNull(),
    contentType: text('content_type').notNull(),
    body: text('body'),
    attachments: text('attachments'),
    threadId: text('thread_id'),
    inReplyTo: text('in_reply_to'),
    metadata: text('metadata'),
    status: text('status', { enum: ['sent', 'delivered', 'expired'] }).notNull(),
    createdAt: ms('created_at').notNull(),
    expiresAt: ms('expires_at').notNull(),
    deliveredAt: ms('delivered_at'),
  },
  (t) => [
    index('messages_inbox_idx').on(t.recipientKey, t.status, t.createdAt, t.messageId),
    // only messages in a thread are listed by thread: the others (most) stay out of this index
    index('messages_thread_idx').on(t.threadId, t.createdAt, t.messageId).where(sql`${t.threadId} IS NOT NULL`),
    // the expiry sweep walks (expires_at, message_id)
    index('messages_expires_idx').on(t.expiresAt, t.messageId),
  ],
)

export const messageBlobs = pgTable(
  'message_blobs',
  {
    messageId: text('message_id')
      .notNull()
      .references(() => messages.messageId, { onDelete: 'cascade' }),
    blobId: text('blob_id').notNull(),
    expiresAt: ms('expires_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.messageId, t.blobId] }), index('message_blobs_blob_idx').on(t.blobId, t.expiresAt)],
)

export const aclEntries = pgTable(
  'acl_entries',
  {
    id: serial('id').primaryKey(),
    ownerKey: text('owner_key').notNull(),
    peerKey: text('peer_key').notNull(),
    entryType: text('entry_type', { enum: ['allow', 'block'] }).notNull(),
    createdAt: ms('created_at').notNull(),
    updatedAt: ms('updated_at').notNull(),
  },
  (t) => [uniqueIndex('acl_owner_peer_idx').on(t.ownerKey, t.peerKey), index('acl_owner_created_idx').on(t.ownerKey, t.id)],
)

export const blobs = pgTable(
  'blobs',
  {
    blobId: text('blob_id').primaryKey(),
    ownerKey: text('owner_key').notNull(),
    hash: text('hash').notNull(),
    sizeBytes: ms('size_bytes').notNull(),
    contentType: text('content_type').notNull(),
    createdAt: ms('created_at').notNull(),
    expiresAt: ms('expires_at').notNull(),
  },
  (t) => [
    index('blobs_owner_hash_idx').on(t.ownerKey, t.hash),
    index('blobs_hash_idx').on(t.hash),
    index('blobs_expires_idx').on(t.expiresAt),
  ],
)

export const webhooks = pgTable('webhooks', {
  publicKey: text('public_key').primaryKey(),
  url: text('url').notNull(),
  secret: text('secret').notNull(),
  enabled: boolean('enabled').notNull().default(true),
  consecutiveFailures: integer('consecutive_failures').notNull().default(0),
  createdAt: ms('created_at').notNull(),
  updatedAt: ms('updated_at').notNull(),
})

export const webhookDeliveries = pgTable(
  'webhook_deliveries',
  {
    deliveryId: text('delivery_id').primaryKey(),
    publicKey: text('public_key').notNull(),
    messageId: text('message_id').notNull(),
    attempts: integer('attempts').notNull().default(0),
    state: text('state', { enum: ['pending', 'in_flight', 'succeeded', 'dropped'] }).notNull(),
    nextAttemptAt: ms('next_attempt_at').notNull(),
    lastError: text('last_error'),
    createdAt: ms('created_at').notNull(),
    updatedAt: ms('updated_at').notNull(),
  },
  (t) => [
    uniqueIndex('webhook_deliveries_message_idx').on(t.messageId, t.publicKey),
    index('webhook_deliveries_due_idx').on(t.state, t.nextAttemptAt),
    index('webhook_deliveries_agent_idx').on(t.publicKey),
  ],
)

export const relayState = pgTable('relay_state', {
  key: text('key').primaryKey(),
  value: text('value').notNull(),
})

export const blobContents = pgTable('blob_contents', {
  hash: text('hash').primaryKey(),
  sizeBytes: ms('size_bytes').notNull(),
  state: text('state', { enum: ['live', 'deleting'] }).notNull().default('live'),
  claimedAt: ms('claimed_at').notNull(),
  updatedAt: ms('updated_at').notNull(),
})

export const admittedKeys = pgTable('admitted_keys', {
  publicKey: text('public_key').primaryKey(),
  note: text('note'),
  createdAt: ms('created_at').notNull(),
})

/** Counted rate-limit events, shared by every instance: a sliding window is the events of a bucket in it. */
export const rateEvents = pgTable(
  'rate_events',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    bucket: text('bucket').notNull(),
    at: ms('at').notNull(),
  },
  (t) => [index('rate_events_bucket_idx').on(t.bucket, t.at)],
)

/** Open WebSockets of every instance; rows of an instance whose heartbeat lapsed do not count. */
export const wsConnections = pgTable(
  'ws_connections',
  {
    publicKey: text('public_key').notNull(),
    connectionId: text('connection_id').notNull(),
    instanceId: text('instance_id').notNull(),
    heartbeatAt: ms('heartbeat_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.publicKey, t.connectionId] }), index('ws_connections_instance_idx').on(t.instanceId)],
)
