/**
 * The relay's stored things as the services see them. These types belong to the services: every
 * storage implementation (SQLite, PostgreSQL) maps its rows to them, and nothing here knows a schema.
 * Times are integer milliseconds since the epoch; JSON documents are held as the exact text the relay
 * returns, so a value round-trips byte for byte.
 */

export type AgentStatus = 'active' | 'suspended'
export type Visibility = 'public' | 'private'
export type InboxPolicy = 'open' | 'closed' | 'allowlist' | 'blocklist'

export interface AgentRecord {
  publicKey: string
  displayName: string | null
  status: AgentStatus
  suspendedReason: string | null
  visibility: Visibility
  inboxPolicy: InboxPolicy
  /** JSON object text. */
  metadata: string
  /** JSON array text of capabilities. */
  capabilities: string
  createdAt: number
  updatedAt: number
  lastActiveAt: number
}

/** The profile fields a PATCH may replace. */
export type AgentProfileFields = Partial<Pick<AgentRecord, 'displayName' | 'visibility' | 'inboxPolicy' | 'metadata' | 'capabilities'>>

/** An agent whose record changed after some moment (operator changes reach running relays this way). */
export interface AgentChange {
  publicKey: string
  status: AgentStatus
  updatedAt: number
}

export type MessageStatus = 'sent' | 'delivered' | 'expired'

export interface MessageRecord {
  messageId: string
  senderKey: string
  recipientKey: string
  contentType: string
  /** JSON text of `body` exactly as sent; null when absent or dropped at expiry. */
  body: string | null
  /** JSON array text of attachments; null when none or dropped at expiry. */
  attachments: string | null
  threadId: string | null
  inReplyTo: string | null
  /** JSON object text; null when absent. */
  metadata: string | null
  status: MessageStatus
  createdAt: number
  expiresAt: number
  deliveredAt: number | null
}

/** A place in the (created_at, message_id) order of message lists. */
export interface MessagePosition {
  createdAt: number
  messageId: string
}

export interface InboxFilter {
  status: MessageStatus
  senderKey?: string
  inReplyTo?: string
  threadId?: string
}

export type AclEntryType = 'allow' | 'block'

export interface AclRecord {
  id: number
  ownerKey: string
  peerKey: string
  entryType: AclEntryType
  createdAt: number
  updatedAt: number
}

export interface BlobRecord {
  blobId: string
  ownerKey: string
  /** SHA-256 of the bytes, lowercase hex: the content address. */
  hash: string
  sizeBytes: number
  contentType: string
  createdAt: number
  expiresAt: number
}

export interface WebhookRecord {
  publicKey: string
  url: string
  /** base64url of the 32-byte HMAC key; never returned by the API. */
  secret: string
  enabled: boolean
  consecutiveFailures: number
  createdAt: number
  updatedAt: number
}

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

/** One agent as discovery returns it; `capabilities` is the stored JSON text. */
export interface DiscoveryRecord {
  publicKey: string
  displayName: string | null
  lastActiveAt: number
  capabilities: string
}

/** A position in discovery order: last_active_at descending, then public_key ascending. */
export interface DiscoveryPosition {
  lastActiveAt: number
  publicKey: string
}

/** Every condition of one search, validated and normalized by the discovery service. */
export interface DiscoveryFilter {
  /** Lower-cased, distinct; all must be present (AND). */
  tags: string[]
  /**
   * Words of a text search, each matched as a prefix of a word in capability names, descriptions or
   * display names, ANDed; empty for no text search. Plain text: storage quotes them for its engine.
   */
  words: string[]
  /** A case-insensitive substring of display_name (taken literally), or null. */
  nameContains: string | null
  activeSince: number | null
  /** Rows strictly after this position. */
  after: DiscoveryPosition | null
  limit: number
}

export interface TagCount {
  tag: string
  agentCount: number
}
