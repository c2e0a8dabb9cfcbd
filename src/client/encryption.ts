/**
 * End-to-end encryption in the client (docs/protocol.md §14): which version to
 * send a recipient (from the declaration in its profile), sealing a send, and opening what arrives —
 * never throwing for a message that does not open, but marking it with the reason.
 */
import { AsyncLocalStorage } from 'node:async_hooks'
import { bindEncryption, ENCRYPTED_CONTENT_TYPE, isEncryptedMessage, readEncryptionDeclaration, type CryptoPrimitives, type Encryption, type EncryptionDeclaration, type EncryptionVersion } from '../crypto/index.ts'
import { nativePrimitives } from '../crypto/native.ts'
import type { Transport } from './transport.ts'
import { openReceived } from './webhook-verify.ts'
import { RelayApiError } from './transport.ts'
import type { AttachmentInput, AttachmentJson, MessageEncryptionJson, MessageJson, SendMessageInput } from './types.ts'

/** How a send is encrypted: `true` picks the version (v3 when the recipient declares it, else v2). */
export type EncryptChoice = boolean | EncryptionVersion

export interface SendEncryptionOptions {
  /** Encrypt even when the recipient declares nothing (true), or with this version; false = never. */
  encrypt?: EncryptChoice
  /** Send plaintext whatever the recipient declares (the relay may still refuse it). */
  plain?: boolean
}

/** How long a recipient's declaration is trusted before its profile is read again. */
const DECLARATION_TTL_MS = 5 * 60_000

export class ClientEncryption {
  readonly api: Encryption
  private readonly declarations = new Map<string, { declaration: EncryptionDeclaration | null; at: number }>()
  /** The blobs created by the uploads of the send attempt running (per async context: sends may overlap). */
  private readonly attemptUploads = new AsyncLocalStorage<string[]>()

  constructor(
    private readonly transport: Transport,
    primitives: CryptoPrimitives = nativePrimitives,
  ) {
    this.api = bindEncryption(primitives)
  }

  /** What `key` declares in its profile; null when nothing, or its profile is not readable by us. */
  async declarationOf(key: string): Promise<EncryptionDeclaration | null> {
    const now = Date.now()
    const hit = this.declarations.get(key)
    if (hit && now - hit.at < DECLARATION_TTL_MS) return hit.declaration
    let declaration: EncryptionDeclaration | null = null
    try {
      const agent = await this.transport.json<{ metadata?: unknown }>('GET', `/v1/agents/${encodeURIComponent(key)}`)
      declaration = readEncryptionDeclaration(agent.metadata)
    } catch (err) {
      // a recipient the relay does not know yet declares nothing; anything else is the caller's problem
      if (!(err instanceof RelayApiError) || (err.status !== 404 && err.status !== 403)) throw err
    }
    this.declarations.set(key, { declaration, at: now })
    return declaration
  }

  forget(key: string): void {
    this.declarations.delete(key)
  }

  /** The version to send `recipientKey`, or null for plaintext, by the rules of the protocol document. */
  async versionFor(recipientKey: string, opts: SendEncryptionOptions): Promise<EncryptionVersion | null> {
    if (opts.plain || opts.encrypt === false) return null
    if (opts.encrypt === 2 || opts.encrypt === 3) return opts.encrypt
    const declared = await this.declarationOf(recipientKey)
    if (declared) return declared.versions.includes(3) ? 3 : 2
    // asked to encrypt for an agent that declares nothing: v2 is what MRP agents read
    return opts.encrypt === true ? 2 : null
  }

  /**
   * Runs a send with the version to use for `recipientKey` (null: plaintext) and, when the relay refuses a
   * plaintext one with `encryption_required` — an inbox whose requirement this client has not seen yet
   * (declarations are kept a few minutes), or a relay that takes ciphertext only — runs it once more
   * encrypted (v3 when the recipient declares it, else v2), unless plaintext was asked for
   * (docs/protocol.md §14.6). `attempt` does the whole send, uploads included, so attachments are
   * encrypted the second time too; the blobs the refused attempt's uploads created (201) are deleted
   * first, those it found already owned (200) kept. `lookup: false` starts in plaintext without reading the profile.
   */
  async sendWithFallback<T>(
    recipientKey: string,
    opts: SendEncryptionOptions & { lookup?: boolean },
    attempt: (version: EncryptionVersion | null) => Promise<T>,
  ): Promise<{ result: T; version: EncryptionVersion | null }> {
    const version = opts.lookup === false && opts.encrypt === undefined ? null : await this.versionFor(recipientKey, opts)
    const created: string[] = []
    try {
      return { result: await this.attemptUploads.run(created, () => attempt(version)), version }
    } catch (err) {
      const mayEncrypt = version === null && !opts.plain && opts.encrypt !== false
      if (!mayEncrypt || !(err instanceof RelayApiError) || err.code !== 'encryption_required') throw err
      // the refused attempt's plaintext uploads would otherwise wait on the relay until they expire
      await this.deleteBlobs(created)
      this.forget(recipientKey)
      const again = (await this.versionFor(recipientKey, { encrypt: true }))!
      return { result: await attempt(again), version: again }
    }
  }

  /**
   * Called by the client after each upload: a blob the relay created for it (201) during a send attempt
   * is that attempt's own; one it already owned (200) is not, and is never deleted on its behalf.
   */
  noteUpload(blobId: string, created: boolean): void {
    if (created) this.attemptUploads.getStore()?.push(blobId)
  }

  /** Deletes blobs this client created, best effort: one that is already gone or attached stays as it is. */
  private async deleteBlobs(blobIds: string[]): Promise<void> {
    for (const id of blobIds) {
      try {
        await this.transport.json('DELETE', `/v1/blobs/${encodeURIComponent(id)}`)
      } catch {
        // left to expire, as it would have been (docs/protocol.md §6)
      }
    }
  }

  /**
   * The message to POST: sealed when `version` is given (a body already encrypted is left alone). A
   * message with no body is sealed too, as a JSON null: the envelope is what proves to the recipient
   * that its encrypted attachments come from us (docs/protocol.md §14.5).
   */
  seal(message: SendMessageInput, version: EncryptionVersion): SendMessageInput {
    if (message.content_type === ENCRYPTED_CONTENT_TYPE) return message
    // plaintext attachments stay as given (the relay can read them); v3 signs the encrypted ones
    const encryptedAttachments = (message.attachments ?? []).filter((a) => a.encrypted)
    const bodyless = message.body === undefined || message.body === null
    const sealed = this.api.sealMessage({
      version,
      sender: this.transport.keys,
      recipientKey: message.recipient_key,
      // null is JSON; under another type it would come back as the text "null"
      contentType: bodyless ? 'application/json' : (message.content_type ?? 'application/json'),
      body: bodyless ? null : message.body,
      attachments: encryptedAttachments.map((a) => ({ dek_enc: a.dek_enc ?? '', dek_ct: a.dek_ct ?? '' })),
    })
    return { ...message, content_type: sealed.content_type, body: sealed.body }
  }

  /**
   * A received message as plaintext with `encryption` facts; a message that does not open keeps its
   * envelope and gets `encryption.error` with the reason. Plaintext messages come back unchanged.
   */
  open<T extends Pick<MessageJson, 'sender_key' | 'recipient_key' | 'content_type' | 'body'>>(message: T): T & { encryption?: MessageEncryptionJson } {
    return openReceived(this.api, this.transport.keys, message)
  }

  /**
   * The data-encryption key of an encrypted attachment of a message we received (or sent to ourselves),
   * only when the sender is proved to have wrapped it (docs/protocol.md §14.5); otherwise DecryptError,
   * `unauthenticated` among the reasons. A message whose encrypted body was not opened yet is opened first.
   */
  attachmentKey(message: AttachmentMessage, attachment: Pick<AttachmentJson, 'dek_enc' | 'dek_ct'> | AttachmentInput): Uint8Array {
    const opened = message.encryption || !isEncryptedMessage(message) ? message : this.open(message)
    return this.api.attachmentKey(this.transport.keys, opened, attachment).dek
  }
}

/** What deciding whether an attachment may be opened reads of its message. */
export type AttachmentMessage = Pick<MessageJson, 'sender_key' | 'recipient_key' | 'content_type' | 'body' | 'attachments'> & { encryption?: MessageEncryptionJson }
