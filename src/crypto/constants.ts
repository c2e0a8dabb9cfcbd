/**
 * Every constant the encrypted formats put on the wire or into a key derivation, in one place, so a
 * change for interoperability is a change of this file (docs/protocol.md §14).
 */
import { utf8 } from './bytes.ts'

/** The content type of an encrypted message; the plaintext's own type travels inside or beside it. */
export const ENCRYPTED_CONTENT_TYPE = 'application/x-m2m-encrypted'

/**
 * Version 2 is MRP's published format (HPKE Auth mode). MRP's guide does not state HPKE's `info` or
 * `aad`; both are empty here (the default of the single-shot APIs MRP's guide builds on), for the
 * message body and for a wrapped attachment key alike.
 */
export const V2_MESSAGE_INFO = new Uint8Array(0)
export const V2_MESSAGE_AAD = new Uint8Array(0)
export const V2_DEK_INFO = new Uint8Array(0)
export const V2_DEK_AAD = new Uint8Array(0)

/** Version 3 (HPKE Base mode with a signature inside): distinct labels so no ciphertext of one kind opens as another. */
export const V3_MESSAGE_INFO = utf8.encode('agent-relay e2e v3 message')
export const V3_MESSAGE_AAD = new Uint8Array(0)
export const V3_DEK_INFO = utf8.encode('agent-relay e2e v3 attachment key')
export const V3_DEK_AAD = new Uint8Array(0)
/** Prefix of the bytes a v3 sender signs; ends in a zero byte so no other signed text of an agent can collide. */
export const V3_SIGNATURE_CONTEXT = utf8.encode('agent-relay e2e v3 signature\0')
/** First byte of a v3 plaintext. */
export const V3_INNER_FORMAT = 0x03
/** Smallest padded v3 plaintext: short messages all look alike. */
export const V3_MIN_PADDED_BYTES = 256

/** Attachment bytes: format byte, then a 16-byte salt, then the segments. */
export const BLOB_FORMAT_AES256GCM_64K = 0x01
export const BLOB_SALT_BYTES = 16
export const BLOB_HEADER_BYTES = 1 + BLOB_SALT_BYTES
export const BLOB_SEGMENT_BYTES = 64 * 1024
export const BLOB_TAG_BYTES = 16
export const BLOB_KEY_INFO = utf8.encode('agent-relay e2e attachment v1')
/** A data-encryption key is 32 random bytes. */
export const DEK_BYTES = 32

/** Versions this code reads and writes, preferred first; what a client publishes in its profile. */
export const SUPPORTED_VERSIONS = [3, 2] as const
export type EncryptionVersion = (typeof SUPPORTED_VERSIONS)[number]
