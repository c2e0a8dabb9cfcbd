/**
 * The relay as one agent sees it, for the MCP tools and resources: a signing client, the pending
 * inbox kept by the WebSocket, and the local side of files (uploads from a path, downloads to a path).
 * Shared by every MCP session of one `relay mcp` process; the key never leaves it.
 */
import { basename } from 'node:path'
import { guessContentType } from '../cli/commands/transfer.ts'
import { RelayClient, type AttachmentInput, type AttachmentJson, type BlobJson, type DownloadedFile, type EncryptionVersion, type FetchLike, type KeyPair, type MessageJson, type ReceivedMessageJson } from '../client/index.ts'
import { FilePolicy, sanitizeFileName } from './file-policy.ts'
import { PendingInbox, type InboxOptions } from './inbox.ts'

export interface BridgeOptions {
  relayUrl: string
  keys: KeyPair
  /** Which local files the tools may read and write (--files, --allow-overwrite). */
  files: FilePolicy
  inbox?: InboxOptions
  fetch?: FetchLike
  /** Wall clock for signatures and expiry (tests pass the relay's fake clock). */
  now?: () => number
  /**
   * Publish that this agent reads encrypted messages (`metadata.encryption`) before the first request,
   * when its profile says nothing about it yet, as the command line does (docs/protocol.md §14).
   */
  publishEncryption?: boolean
}

/** An attachment as a tool takes it: a blob id, a local path, or an object saying which. */
export type AttachmentSpec =
  | string
  | { blob_id?: string; path?: string; filename?: string; content_type?: string; encrypted?: boolean; dek_enc?: string; dek_ct?: string }

export interface SentAttachment {
  blob_id: string
  filename?: string
  uploaded_from?: string
  size?: number
  sha256?: string
  encrypted?: boolean
}

const BLOB_ID = /^blob_[A-Za-z0-9_-]{1,59}$/

export class Bridge {
  readonly client: RelayClient
  readonly inbox: PendingInbox
  readonly relayUrl: string

  constructor(readonly opts: BridgeOptions) {
    this.relayUrl = opts.relayUrl.replace(/\/+$/, '')
    this.client = new RelayClient({ baseUrl: this.relayUrl, keys: opts.keys, fetch: opts.fetch, now: opts.now, encryption: { publish: opts.publishEncryption === true } })
    this.inbox = new PendingInbox(this.client, { now: opts.now, ...opts.inbox })
  }

  get publicKey(): string {
    return this.client.publicKey
  }

  start(): void {
    this.inbox.start()
  }

  close(): Promise<void> {
    return this.inbox.close()
  }

  /**
   * A message this agent sent or received, leaving its status alone: a pending one comes from the inbox.
   * Reading one addressed to this agent from the relay marks it delivered, so that only happens for a
   * message the socket has not pushed — one this agent sent, or one already delivered. While the socket
   * is not receiving, a message still `sent` that this bridge did not send may be one waiting for this
   * agent: it is not read (that would take it out of the inbox before it is handled).
   */
  async readMessage(messageId: string): Promise<MessageJson> {
    const held = this.inbox.get(messageId)
    if (held) return held
    if (await this.inbox.whenSynced()) {
      const late = this.inbox.get(messageId)
      if (late) return late
    } else if (!this.sentHere.has(messageId) && (await this.client.messageStatus(messageId)).status === 'sent') {
      const s = this.inbox.status()
      throw new Error(
        `message ${messageId} is still waiting on the relay and this bridge is not receiving (WebSocket ${s.state}${s.last_error ? `: ${s.last_error}` : ''}): ` +
          'reading it by id now would take it out of your inbox before it is handled, so it is not read. It arrives in relay_inbox once the ' +
          'connection is back (relay_whoami shows it); for a message you sent, relay_message_status answers now.',
      )
    }
    return this.client.getMessage(messageId)
  }

  /** Ids of messages sent through this bridge (reading them by id changes nothing), the latest few thousand. */
  private readonly sentHere = new Set<string>()

  /** Sends a message and remembers that this agent wrote it. */
  async send(input: Parameters<RelayClient['send']>[0]): Promise<Awaited<ReturnType<RelayClient['send']>>> {
    const result = await this.client.send(input)
    this.sentHere.add(result.message_id)
    if (this.sentHere.size > 4096) this.sentHere.delete(this.sentHere.values().next().value as string)
    return result
  }

  get files(): FilePolicy {
    return this.opts.files
  }

  /** Uploads a local file the policy allows; the signature covers its SHA-256, so it is read twice, never held in memory. */
  async upload(path: string, contentType?: string): Promise<BlobJson & { path: string }> {
    const file = await this.opts.files.readable(path)
    const blob = await this.client.uploadBlob(file, { contentType: contentType ?? guessContentType(file) })
    return { ...blob, path: file }
  }

  /**
   * The message (pending, or `messageId`) that attaches a blob, with that attachment; undefined when no
   * message at hand names it.
   */
  async attachmentOf(blobId: string, messageId?: string): Promise<{ message: ReceivedMessageJson; attachment: AttachmentJson } | undefined> {
    const find = (m: ReceivedMessageJson | undefined) => {
      const attachment = m?.attachments?.find((a) => a.blob_id === blobId)
      return m && attachment ? { message: m, attachment } : undefined
    }
    if (messageId !== undefined) return find(await this.readMessage(messageId))
    for (const m of this.inbox.list({ limit: Number.MAX_SAFE_INTEGER }).messages) {
      const hit = find(m)
      if (hit) return hit
    }
    return undefined
  }

  /** The name another agent gave a blob (see attachmentOf). */
  async attachmentName(blobId: string, messageId?: string): Promise<string | undefined> {
    return (await this.attachmentOf(blobId, messageId))?.attachment.filename
  }

  /**
   * Downloads a blob to `path` (a file, or a directory to put it in; default: the first files
   * directory) under the sender's file name, sanitised, checked against its SHA-256 before it is
   * renamed into place. The policy decides where it may go and whether a file may be replaced. An
   * end-to-end encrypted attachment is decrypted on the way (every segment authenticated): the file
   * holds the plaintext, and `decrypted` says so.
   */
  async download(blobId: string, path: string | undefined, opts: { overwrite?: boolean; messageId?: string } = {}): Promise<DownloadedFile & { decrypted?: true }> {
    const found = await this.attachmentOf(blobId, opts.messageId)
    const name = sanitizeFileName(found?.attachment.filename, blobId)
    const { target, replaces } = await this.opts.files.writable(path, name, opts.overwrite ?? false)
    if (found?.attachment.encrypted) {
      if (found.message.encryption?.error) throw new Error(`message ${found.message.message_id} was not decrypted (${found.message.encryption.error.reason}): its attachments cannot be either`)
      return { ...(await this.client.downloadDecryptedToFile(found.message, found.attachment, target, { overwrite: replaces })), decrypted: true }
    }
    return this.client.downloadToFile(blobId, target, { overwrite: replaces })
  }

  /**
   * Attachments for a send: blob ids as they are, local files uploaded first — named after the file, or,
   * encrypted for `encryptFor`, without a name (the relay sees names; the CLI sends none either).
   */
  async attachments(specs: AttachmentSpec[], encryptFor?: { recipientKey: string; version: EncryptionVersion }): Promise<{ input: AttachmentInput[]; sent: SentAttachment[] }> {
    const input: AttachmentInput[] = []
    const sent: SentAttachment[] = []
    for (const spec of specs) {
      const s = typeof spec === 'string' ? (BLOB_ID.test(spec) ? { blob_id: spec } : { path: spec }) : spec
      if ((s.blob_id === undefined) === (s.path === undefined)) throw new Error('each attachment needs exactly one of blob_id and path')
      const { path, content_type, ...rest } = s
      if (path !== undefined && encryptFor) {
        // encrypted for the recipient before it leaves: the relay stores ciphertext only, and no file
        // name, which it would see (docs/protocol.md §14.5)
        const file = await this.opts.files.readable(path)
        const up = await this.client.uploadEncryptedBlob(file, encryptFor)
        input.push(up.attachment)
        sent.push({ blob_id: up.blob.blob_id, uploaded_from: file, size: up.plain_size, sha256: up.blob.hash, encrypted: true })
      } else if (path !== undefined) {
        const blob = await this.upload(path, content_type)
        const filename = rest.filename ?? basename(blob.path)
        input.push({ ...rest, blob_id: blob.blob_id, filename })
        sent.push({ blob_id: blob.blob_id, filename, uploaded_from: blob.path, size: blob.size, sha256: blob.hash })
      } else {
        // a blob encrypted before (relay_upload cannot, another client may) goes without a name too
        const filename = rest.encrypted ? undefined : rest.filename
        input.push({ ...rest, blob_id: s.blob_id as string, filename })
        sent.push({ blob_id: s.blob_id as string, filename })
      }
    }
    return { input, sent }
  }
}
