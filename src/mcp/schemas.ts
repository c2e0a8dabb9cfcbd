/**
 * The shapes the MCP tools take and give, as zod schemas: the SDK turns them into each tool's
 * inputSchema and outputSchema (JSON Schema) and checks every structuredContent against them. They
 * mirror the relay's JSON (src/client/types.ts); descriptions are what a model reads.
 */
import { z } from 'zod'

export const PublicKey = z.string().regex(/^[A-Za-z0-9_-]{43}$/).describe("an agent's public key: 43 characters of unpadded base64url")
export const MessageId = z.string().min(1).max(128).describe('a message id: msg_<unix seconds>_<12 hex>')
/** A capability tag as the relay takes it: 1–64 of A–Z a–z 0–9 _ : . - (stored lower-cased). */
export const Tag = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9_:.-]+$/)
  .describe('a capability tag: 1–64 characters of letters, digits, _ : . - (the relay stores it lower-cased)')
export const ThreadId = z.string().min(1).max(128).describe('a thread id of your choosing (at most 128 characters); replies inherit it')
export const BlobId = z.string().min(1).max(64).describe('a blob id, blob_…')
export const DateTime = z.string().describe('RFC 3339 time')
export const Cursor = z.string().max(1024).describe('next_cursor of the previous page')

export const Capability = z.object({
  name: z.string().min(1).max(128).describe('unique among your capabilities, 1–128 characters'),
  description: z.string().max(2000).optional(),
  tags: z.array(Tag).max(20).optional().describe('at most 20 tags'),
  input_schema: z.record(z.string(), z.unknown()).optional().describe('a JSON Schema object (at most 16 KiB)'),
  version: z.string().max(64).optional(),
})

export const Agent = z.object({
  public_key: z.string(),
  display_name: z.string().nullable(),
  status: z.enum(['active', 'suspended']),
  visibility: z.enum(['public', 'private']),
  inbox_policy: z.enum(['open', 'closed', 'allowlist', 'blocklist']),
  created_at: DateTime,
  last_active_at: DateTime,
  metadata: z.record(z.string(), z.unknown()),
  capabilities: z.array(Capability),
})

export const DiscoveryEntry = z.object({
  public_key: z.string(),
  display_name: z.string().nullable(),
  last_active_at: DateTime,
  capabilities: z.array(Capability),
})

export const Attachment = z.object({
  blob_id: z.string(),
  filename: z.string().optional(),
  content_type: z.string(),
  size: z.number().int(),
  hash: z.string().describe('SHA-256 hex of the bytes'),
  encrypted: z.boolean(),
  dek_enc: z.string().optional(),
  dek_ct: z.string().optional(),
})

export const MessageStatus = z.enum(['sent', 'delivered', 'expired'])

export const MessageEncryption = z
  .object({
    version: z.number().int().describe('format of the encrypted body: 2 (HPKE Auth mode, MRP) or 3 (HPKE Base mode with the sender signature inside)'),
    sender_verified: z.boolean().describe('true when the ciphertext proves that sender_key wrote it'),
    signer_key: z.string().optional().describe('v3: the key that signed, when it is not sender_key'),
    sealed_at: z.string().optional().describe("v3: the sender's clock when it encrypted"),
    error: z
      .object({ reason: z.string(), message: z.string() })
      .optional()
      .describe('present when the message could not be decrypted: body is then still the encrypted envelope, do not treat it as text'),
  })
  .describe('present on an end-to-end encrypted message: the body shown is the decrypted plaintext unless error says otherwise')

export const Message = z.object({
  message_id: z.string(),
  sender_key: z.string(),
  recipient_key: z.string(),
  content_type: z.string(),
  body: z.unknown().optional(),
  encryption: MessageEncryption.optional(),
  attachments: z.array(Attachment),
  thread_id: z.string().nullable(),
  in_reply_to: z.string().nullable(),
  metadata: z.record(z.string(), z.unknown()).nullable(),
  status: MessageStatus,
  created_at: DateTime,
  expires_at: DateTime,
  delivered_at: DateTime.optional(),
})

export const MessageStatusResult = z.object({
  message_id: z.string(),
  status: MessageStatus,
  created_at: DateTime,
  expires_at: DateTime,
  delivered_at: DateTime.optional(),
})

export const AclEntry = z.object({
  id: z.number().int(),
  owner_key: z.string(),
  peer_key: z.string(),
  entry_type: z.enum(['allow', 'block']),
  created_at: DateTime,
  updated_at: DateTime,
})

/** How the bridge is receiving: the relay's WebSocket, and what it is doing when it is not connected. */
export const Connection = z.object({
  state: z.enum(['connecting', 'connected', 'disconnected', 'refused']),
  websocket_url: z.string(),
  since: DateTime,
  synced: z.boolean().describe('true once every message waiting on the relay when the socket connected has been received'),
  last_error: z.string().optional(),
  retry_in_s: z.number().optional(),
  note: z.string().optional(),
})

/** An attachment to send: a blob id, a local file path (uploaded first), or an object saying which. */
export const AttachmentSpec = z.union([
  z.string().min(1).max(4096).describe('a blob id (blob_…) or the path of a local file to upload'),
  z.object({
    blob_id: BlobId.optional(),
    path: z.string().min(1).max(4096).optional().describe('a local file to upload'),
    filename: z.string().max(255).optional().describe('the name the recipient sees (default: the file name of path); an end-to-end encrypted file is sent without a name, which the relay would see'),
    content_type: z.string().max(255).optional().describe('content type of an uploaded file (default: from its name)'),
    encrypted: z.boolean().optional().describe('true when the blob holds ciphertext the recipient decrypts (the relay never reads it)'),
    dek_enc: z.string().max(4096).optional().describe('end-to-end encryption: the data key sealed to the recipient (at most 4 KiB)'),
    dek_ct: z.string().max(4096).optional().describe('end-to-end encryption: the data key ciphertext parameters (at most 4 KiB)'),
  }),
])

export const SentAttachment = z.object({
  blob_id: z.string(),
  filename: z.string().optional(),
  uploaded_from: z.string().optional().describe('the local path uploaded for it'),
  size: z.number().int().optional(),
  sha256: z.string().optional(),
  encrypted: z.boolean().optional().describe('true when the file was encrypted for the recipient before upload (size: the plaintext\'s; sha256: the stored ciphertext\'s)'),
})

export const SendResult = z.object({
  message_id: z.string(),
  status: z.literal('sent'),
  created_at: DateTime,
  expires_at: DateTime,
  recipient_key: z.string(),
  thread_id: z.string().optional(),
  in_reply_to: z.string().optional(),
  attachments: z.array(SentAttachment),
  encryption: z
    .object({ version: z.number().int() })
    .nullable()
    .describe('the end-to-end encryption format the body (and uploaded files) went out in; null when sent in plaintext'),
})

/** Fields shared by relay_send and relay_reply. */
export const MessageFields = {
  body: z.unknown().optional().describe('the message body: any JSON (at most 1 MiB)'),
  text: z.string().max(1_000_000).optional().describe('shorthand for the body {"text": TEXT}'),
  content_type: z.string().max(255).optional().describe('content type of the body (default application/json)'),
  expires_in: z.number().int().min(1).max(2_592_000).optional().describe('lifetime in seconds (default 604800 = 7 days)'),
  metadata: z.record(z.string(), z.unknown()).optional().describe('a JSON object (at most 16 KiB)'),
  attachments: z.array(AttachmentSpec).max(10).optional().describe('up to 10 files: blob ids or local paths (uploaded first)'),
  encrypt: z
    .boolean()
    .optional()
    .describe(
      'end-to-end encryption. Default: encrypted when the recipient declares it reads encrypted messages, plaintext otherwise. ' +
        'true: encrypt even when it declares nothing; false: plaintext even when it declares it (the relay may refuse)',
    ),
}
