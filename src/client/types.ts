/**
 * The JSON the relay speaks, as plain TypeScript types. The client owns them so that it (and the
 * package built from it) depends on no server code; the server's own shapes are checked against these
 * at compile time (test/client/wire-types.test.ts), so the two cannot drift apart unnoticed.
 * Field names are the wire's snake_case; times are RFC 3339 strings with milliseconds.
 */

/** An agent's identity: its Ed25519 public key, 43 characters of unpadded base64url. */
export type PublicKey = string

export type Visibility = 'public' | 'private'
export type InboxPolicy = 'open' | 'closed' | 'allowlist' | 'blocklist'

export interface CapabilityJson {
  name: string
  description?: string
  /** Lower-cased by the relay; 1–64 characters of A-Z a-z 0-9 _ : . - */
  tags?: string[]
  input_schema?: Record<string, unknown>
  version?: string
}

export interface AgentJson {
  public_key: PublicKey
  /** `null` when unset. */
  display_name: string | null
  status: 'active' | 'suspended'
  visibility: Visibility
  inbox_policy: InboxPolicy
  created_at: string
  last_active_at: string
  metadata: Record<string, unknown>
  capabilities: CapabilityJson[]
}

/** PATCH of your own profile: each field given replaces that field whole. */
export interface AgentPatchInput {
  /** `null` clears the name. */
  display_name?: string | null
  visibility?: Visibility
  inbox_policy?: InboxPolicy
  metadata?: Record<string, unknown>
  capabilities?: CapabilityJson[]
}

export interface DiscoveryEntryJson {
  public_key: PublicKey
  /** `null` when unset. */
  display_name: string | null
  last_active_at: string
  capabilities: CapabilityJson[]
}

export interface DiscoverResultJson {
  agents: DiscoveryEntryJson[]
  has_more: boolean
  next_cursor: string | null
}

export interface CapabilityCatalogJson {
  capabilities: { tag: string; agent_count: number }[]
}

export type MessageStatus = 'sent' | 'delivered' | 'expired'

/** An attachment as a sender gives it; the relay fills `content_type`, `size` and `hash` itself. */
export interface AttachmentInput {
  blob_id: string
  filename?: string
  content_type?: string
  size?: number
  hash?: string
  encrypted?: boolean
  dek_enc?: string
  dek_ct?: string
}

export interface AttachmentJson {
  blob_id: string
  filename?: string
  content_type: string
  size: number
  /** SHA-256 hex of the blob's bytes. */
  hash: string
  encrypted: boolean
  dek_enc?: string
  dek_ct?: string
}

export interface SendMessageInput {
  recipient_key: PublicKey
  /** Default application/json; stored verbatim. */
  content_type?: string
  /** Any JSON, at most 1 MiB serialized. */
  body?: unknown
  attachments?: AttachmentInput[]
  thread_id?: string
  in_reply_to?: string
  /** Seconds, 1–2592000; default 604800 (7 days). */
  expires_in?: number
  metadata?: Record<string, unknown>
}

export interface SendResultJson {
  message_id: string
  status: 'sent'
  created_at: string
  expires_at: string
}

/** Set by the client on a message that arrived end-to-end encrypted (never sent by the relay). */
export interface MessageEncryptionJson {
  /** The format version of the body (2: MRP's HPKE Auth mode; 3: HPKE Base mode with a signature inside). */
  version: number
  /** True when the ciphertext proves that `sender_key` wrote it. */
  sender_verified: boolean
  /** v3: the key that signed, when it is not `sender_key`. */
  signer_key?: string
  /** v3: the sender's clock when it sealed the message. */
  sealed_at?: string
  /** Present when the message could not be decrypted: `body` is then still the encrypted envelope. */
  error?: { reason: string; message: string }
}

export interface MessageJson {
  message_id: string
  sender_key: PublicKey
  recipient_key: PublicKey
  content_type: string
  body?: unknown
  /** `[]` when none. */
  attachments: AttachmentJson[]
  thread_id: string | null
  in_reply_to: string | null
  metadata: Record<string, unknown> | null
  status: MessageStatus
  created_at: string
  expires_at: string
  delivered_at?: string
}

export interface MessagePageJson {
  messages: MessageJson[]
  has_more: boolean
  next_cursor: string | null
}

/** A message as the client hands it over: decrypted when it arrived encrypted, with what decryption found. */
export type ReceivedMessageJson = MessageJson & { encryption?: MessageEncryptionJson }

export interface ReceivedPageJson extends Omit<MessagePageJson, 'messages'> {
  messages: ReceivedMessageJson[]
}

export interface MessageStatusJson {
  message_id: string
  status: MessageStatus
  created_at: string
  expires_at: string
  delivered_at?: string
}

/** Query of GET /v1/messages. */
export interface PollQuery {
  cursor?: string
  limit?: number
  status?: MessageStatus
  sender_key?: PublicKey
  in_reply_to?: string
  thread_id?: string
}

export interface PageQuery {
  cursor?: string
  limit?: number
}

export type AclEntryType = 'allow' | 'block'

export interface AclEntryJson {
  id: number
  owner_key: PublicKey
  peer_key: PublicKey
  entry_type: AclEntryType
  created_at: string
  updated_at: string
}

export interface BlobJson {
  blob_id: string
  /** SHA-256 hex of the bytes. */
  hash: string
  size: number
  content_type: string
  created_at: string
  expires_at: string
}

export interface WebhookConfigJson {
  url: string
  enabled: boolean
  consecutive_failures: number
  created_at: string
  updated_at: string
}

/** The body the relay POSTs to a webhook: the message without status, attachments as metadata. */
export interface WebhookDeliveryJson {
  delivery_id: string
  message: {
    message_id: string
    sender_key: PublicKey
    recipient_key: PublicKey
    content_type: string
    body?: unknown
    attachments: unknown[]
    thread_id: string | null
    in_reply_to: string | null
    metadata: Record<string, unknown> | null
    created_at: string
    expires_at: string
  }
}

/** The error envelope of every refused request. */
export interface ErrorEnvelopeJson {
  error: { code: string; message: string; details: unknown; request_id: string }
}
