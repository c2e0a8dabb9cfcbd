/**
 * End-to-end encryption for agents (docs/protocol.md §14): the formats, over a
 * set of primitives the caller chooses — `nativePrimitives` (./native.ts) in Bun and Node,
 * `purePrimitives` (./pure.ts) in a browser. `bindEncryption(primitives)` returns the whole API with the
 * primitives filled in; this module itself imports neither implementation.
 */
import { BlobOpener, BlobSealer, createBlobDecryptor, createBlobEncryptor, decryptBlob, decryptBlobStream, encryptBlob, encryptBlobStream } from './blob.ts'
import { unwrapAttachmentKey, type AttachmentContext } from './attachment-key.ts'
import { newDek, unwrapDek, wrapDek, type WrapKeyInput } from './dek.ts'
import { openMessage, sealMessage, type AgentKeys, type EncryptedMessageFields, type SealMessageInput } from './message.ts'
import type { CryptoPrimitives } from './primitives.ts'
import type { EncryptionVersion } from './constants.ts'

export { ENCRYPTED_CONTENT_TYPE, SUPPORTED_VERSIONS, BLOB_SEGMENT_BYTES, type EncryptionVersion } from './constants.ts'
export { DecryptError, type DecryptFailureReason } from './errors.ts'
export { encryptedBlobSize, decryptedBlobSize, type BlobOpener, type BlobSealer } from './blob.ts'
export { isEncryptedMessage, parseEncryptedBody, type AgentKeys, type EncryptedBody, type EncryptedMessageFields, type EncryptionFacts, type OpenedMessage, type SealMessageInput, type SealedMessage, type WrappedKeyFields } from './message.ts'
export type { UnwrappedKey, WrapKeyInput } from './dek.ts'
export type { AttachmentContext } from './attachment-key.ts'
export type { CryptoPrimitives } from './primitives.ts'
export { encryptionDeclaration, readEncryptionDeclaration, ENCRYPTION_METADATA_KEY, type EncryptionDeclaration } from './declaration.ts'

export function bindEncryption(p: CryptoPrimitives) {
  return {
    primitives: p,
    sealMessage: (input: SealMessageInput) => sealMessage(p, input),
    openMessage: (recipient: AgentKeys, message: EncryptedMessageFields) => openMessage(p, recipient, message),
    newDek: () => newDek(p),
    wrapDek: (input: WrapKeyInput) => wrapDek(p, input),
    unwrapDek: (recipient: AgentKeys, senderKey: string, fields: { dek_enc?: string; dek_ct?: string }, prefer?: EncryptionVersion) => unwrapDek(p, recipient, senderKey, fields, prefer),
    /** The DEK of an attachment of a received message, only when its sender is proved to have wrapped it. */
    attachmentKey: (recipient: AgentKeys, message: AttachmentContext, attachment: { dek_enc?: string; dek_ct?: string }) => unwrapAttachmentKey(p, recipient, message, attachment),
    encryptBlobStream: (dek: Uint8Array, source: ReadableStream<Uint8Array>) => encryptBlobStream(p, dek, source),
    decryptBlobStream: (dek: Uint8Array, source: ReadableStream<Uint8Array>) => decryptBlobStream(p, dek, source),
    createBlobEncryptor: (dek: Uint8Array) => createBlobEncryptor(p, dek),
    createBlobDecryptor: (dek: Uint8Array) => createBlobDecryptor(p, dek),
    /** The segment cipher with a fixed salt (random when not given): the same plaintext seals to the same bytes. */
    blobSealer: (dek: Uint8Array, salt?: Uint8Array) => new BlobSealer(p, dek, salt),
    /** Ciphertext chunks in, authenticated plaintext segments out, without streams. */
    blobOpener: (dek: Uint8Array) => new BlobOpener(p, dek),
    encryptBlob: (dek: Uint8Array, plaintext: Uint8Array) => encryptBlob(p, dek, plaintext),
    decryptBlob: (dek: Uint8Array, ciphertext: Uint8Array) => decryptBlob(p, dek, ciphertext),
  }
}

export type Encryption = ReturnType<typeof bindEncryption>
