/**
 * A typed client for the relay: signs every request and covers every endpoint. The command line, the
 * MCP bridge and the tests use it; other agents install it as a package (`m2m-relay`) and run
 * it on Node ≥ 20 or Bun.
 */
import { signRequest } from '../auth/sign.ts'
import { prepareBlobSource, type BlobSource, type PreparedBlob } from './blob-source.ts'
import { prepareEncryptedUpload } from './encrypted-source.ts'
import { writeBatchesToFile, writeBlobToFile, type DownloadedFile } from './blob-file.ts'
import { RelaySocket, listenLoop, type ListenOptions, type SocketOptions } from './socket.ts'
import { ClientEncryption, type AttachmentMessage, type SendEncryptionOptions } from './encryption.ts'
import { ENCRYPTED_CONTENT_TYPE, ENCRYPTION_METADATA_KEY, encryptionDeclaration, type BlobOpener, type CryptoPrimitives, type EncryptionVersion } from '../crypto/index.ts'
import { RelayApiError, Transport, assertRelayAnswer, buildQuery, readJson, type ClientOptions, type Query } from './transport.ts'
import type {
  AclEntryJson,
  AclEntryType,
  AgentJson,
  AgentPatchInput,
  BlobJson,
  CapabilityCatalogJson,
  CapabilityJson,
  DiscoverResultJson,
  DiscoveryEntryJson,
  MessageJson,
  AttachmentInput,
  AttachmentJson,
  MessagePageJson,
  MessageStatusJson,
  ReceivedMessageJson,
  ReceivedPageJson,
  PageQuery,
  PollQuery,
  SendMessageInput,
  SendResultJson,
  WebhookConfigJson,
} from './types.ts'

export {
  DEFAULT_RATE_LIMIT_RETRY,
  NotARelayError,
  RelayApiError,
  RelayConnectionError,
  Transport,
  buildQuery,
  readJson,
  retryAfterMs,
  type ClientOptions,
  type FetchLike,
  type Query,
  type RateLimitRetry,
  type RateLimitedInfo,
} from './transport.ts'
export { generateKeyPair, keyPairFromSeed, signRequest, signWsAuth, decodeKeyFile, encodeKeyFile, type KeyPair } from '../auth/sign.ts'
export type { BlobSource } from './blob-source.ts'
export type { DownloadedFile } from './blob-file.ts'
export { NoWebSocketError, RelaySocket, wsUrl, type ListenOptions, type SocketClosed, type SocketOptions, type WebSocketConstructor, type WebSocketLike } from './socket.ts'
export { WebhookVerificationError, verifyWebhook, type VerifyWebhookInput } from './webhook-verify.ts'
export type * from './types.ts'
export { ClientEncryption, type AttachmentMessage, type EncryptChoice, type SendEncryptionOptions } from './encryption.ts'
export {
  DecryptError,
  ENCRYPTED_CONTENT_TYPE,
  SUPPORTED_VERSIONS,
  bindEncryption,
  encryptedBlobSize,
  decryptedBlobSize,
  readEncryptionDeclaration,
  type DecryptFailureReason,
  type EncryptionDeclaration,
  type EncryptionVersion,
  type OpenedMessage,
  type SealedMessage,
} from '../crypto/index.ts'
export { nativePrimitives } from '../crypto/native.ts'

/** End-to-end encryption settings of a client. */
export interface ClientEncryptionOptions {
  /** The primitives (default: node:crypto's, `nativePrimitives`). */
  primitives?: CryptoPrimitives
  /** Decrypt what arrives (default true); false hands encrypted envelopes over as they are. */
  decrypt?: boolean
  /**
   * Read each new recipient's profile (once per 5 minutes) to encrypt for those that declare it
   * (default true); false encrypts only when a send asks with `encrypt`.
   */
  autoEncrypt?: boolean
  /**
   * Publish `metadata.encryption` on your profile before the first signed request, when the profile
   * has no `encryption` entry at all (an entry of any shape, even one declaring nothing, is left
   * alone). Default false; the command-line client turns it on. A DeclarationMemory remembers that it
   * was done, so later clients of the same key skip even the profile read.
   */
  publish?: boolean | DeclarationMemory
}

/** Where a client remembers that a key's profile carries an encryption entry on a relay. */
export interface DeclarationMemory {
  has(relayUrl: string, publicKey: string): boolean
  remember(relayUrl: string, publicKey: string): void
}

/** What ensureEncryptionDeclared() found: remembered (no request), present (one read), published (read + write). */
export type DeclarationOutcome = 'remembered' | 'present' | 'published'

/** listen() options: the handler gets messages decrypted (see ReceivedMessageJson). */
export type ClientListenOptions = Omit<ListenOptions, 'onMessage'> & {
  onMessage: (message: ReceivedMessageJson, socket: RelaySocket) => unknown | Promise<unknown>
}

/** A message to send, with how to encrypt it. */
export type SendInput = SendMessageInput & SendEncryptionOptions

/** An encrypted upload: the blob and the attachment entry to put in a message. */
export interface EncryptedUpload {
  blob: BlobJson
  attachment: AttachmentInput & { encrypted: true; dek_enc: string; dek_ct: string }
  /** The plaintext size (the blob's `size` is the ciphertext's). */
  plain_size: number
}

/** Parameters of GET /v1/discover; all optional (none lists every public agent). */
export interface DiscoverQueryInput {
  /** One tag or several (ANDed). */
  tag?: string | string[]
  q?: string
  name?: string
  /** RFC 3339 text or a Date. */
  active_since?: string | Date
  limit?: number
  cursor?: string
}

export interface CapabilitiesQueryInput {
  prefix?: string
  limit?: number
}

export class RelayClient {
  readonly transport: Transport
  /** Sealing, opening and the recipients' declarations (docs/protocol.md §14). */
  readonly encryption: ClientEncryption
  private readonly decrypt: boolean
  private readonly autoEncrypt: boolean
  private readonly declarationMemory?: DeclarationMemory
  private declared?: Promise<DeclarationOutcome>

  constructor(opts: ClientOptions & { encryption?: ClientEncryptionOptions }) {
    this.transport = new Transport(opts)
    this.encryption = new ClientEncryption(this.transport, opts.encryption?.primitives)
    this.decrypt = opts.encryption?.decrypt !== false
    this.autoEncrypt = opts.encryption?.autoEncrypt !== false
    const publish = opts.encryption?.publish
    if (publish) {
      if (typeof publish === 'object') this.declarationMemory = publish
      this.transport.beforeFirstRequest = () => this.ensureEncryptionDeclared()
    }
  }

  /**
   * Publishes that you read encrypted messages (`metadata.encryption`, the rest of the metadata kept)
   * unless your profile already has an `encryption` entry — once per client; with the `publish`
   * memory, once per key and relay. A failure is thrown and tried again on the next call.
   */
  ensureEncryptionDeclared(): Promise<DeclarationOutcome> {
    return (this.declared ??= this.declareOnce().catch((err) => {
      this.declared = undefined
      throw err
    }))
  }

  private async declareOnce(): Promise<DeclarationOutcome> {
    const memory = this.declarationMemory
    const { baseUrl } = this.transport
    if (memory?.has(baseUrl, this.publicKey)) return 'remembered'
    const path = `/v1/agents/${this.publicKey}`
    const me = await this.transport.json<AgentJson>('GET', path, undefined, { prelude: false })
    const metadata = (me.metadata ?? {}) as Record<string, unknown>
    let outcome: DeclarationOutcome = 'present'
    if (!Object.hasOwn(metadata, ENCRYPTION_METADATA_KEY)) {
      await this.transport.json('PATCH', path, { metadata: { ...metadata, [ENCRYPTION_METADATA_KEY]: encryptionDeclaration(false) } }, { prelude: false })
      outcome = 'published'
    }
    try {
      memory?.remember(baseUrl, this.publicKey)
    } catch {
      // a memory that cannot be written costs one profile read next time, nothing more
    }
    return outcome
  }

  private opened<T extends MessageJson>(message: T): T & ReceivedMessageJson {
    return this.decrypt ? this.encryption.open(message) : message
  }

  private openedPage(page: MessagePageJson): ReceivedPageJson {
    return this.decrypt ? { ...page, messages: page.messages.map((m) => this.encryption.open(m)) } : page
  }

  get publicKey(): string {
    return this.transport.keys.publicKey
  }

  // --- health (unsigned) ---
  async health(path: '' | '/ready' | '/details' = ''): Promise<any> {
    const t = this.transport
    const res = await t.fetchFn(new Request(`${t.baseUrl}/v1/health${path}`))
    // /ready answers 503 with a body that says why: that is an answer, not an error
    if (res.status === 503) {
      assertRelayAnswer(res, t.baseUrl)
      return res.json()
    }
    return readJson(res, t.baseUrl)
  }

  // --- agents ---
  getAgent(publicKey: string = this.publicKey): Promise<AgentJson> {
    return this.transport.json('GET', `/v1/agents/${encodeURIComponent(publicKey)}`)
  }

  updateProfile(patch: AgentPatchInput): Promise<AgentJson> {
    return this.transport.json('PATCH', `/v1/agents/${this.publicKey}`, patch)
  }

  deleteAgent(): Promise<void> {
    return this.transport.json('DELETE', `/v1/agents/${this.publicKey}`)
  }

  async getCapabilities(publicKey: string = this.publicKey): Promise<CapabilityJson[]> {
    const res = await this.transport.json<{ capabilities: CapabilityJson[] }>(
      'GET',
      `/v1/agents/${encodeURIComponent(publicKey)}/capabilities`,
    )
    return res.capabilities
  }

  // --- discovery ---
  /** One page of public, active agents; pass `next_cursor` back as `cursor` for the next page. */
  discover(query: DiscoverQueryInput): Promise<DiscoverResultJson> {
    const { active_since, ...rest } = query
    const since = active_since instanceof Date ? active_since.toISOString() : active_since
    return this.transport.json('GET', '/v1/discover' + buildQuery({ ...rest, active_since: since }))
  }

  /** Every page of a discovery query, following next_cursor until has_more is false. */
  async *discoverAll(query: Omit<DiscoverQueryInput, 'cursor'>): AsyncGenerator<DiscoveryEntryJson> {
    let cursor: string | undefined
    do {
      const page = await this.discover({ ...query, cursor })
      yield* page.agents
      cursor = page.next_cursor ?? undefined
    } while (cursor)
  }

  /** The capability catalog: tags with counts of public, active agents, most used first. */
  async capabilities(query: CapabilitiesQueryInput = {}): Promise<CapabilityCatalogJson['capabilities']> {
    const res = await this.transport.json<CapabilityCatalogJson>('GET', '/v1/capabilities' + buildQuery({ ...query }))
    return res.capabilities
  }

  // --- messages ---
  /**
   * Sends a message; resolves once the relay has committed it. The body is end-to-end encrypted when
   * `encrypt` asks for it or the recipient's profile declares it reads encrypted messages (v3 when
   * declared, else v2); `plain: true` sends plaintext. A plaintext send refused with
   * `encryption_required` is sent again encrypted, unless `plain` or `encrypt: false` was given.
   */
  async send(message: SendInput): Promise<SendResultJson> {
    const { encrypt, plain, ...wire } = message
    const post = (version: EncryptionVersion | null) => this.transport.json<SendResultJson>('POST', '/v1/messages', version ? this.encryption.seal(wire, version) : wire)
    // a body the caller already encrypted goes as it is
    if (wire.content_type === ENCRYPTED_CONTENT_TYPE) return post(null)
    return (await this.encryption.sendWithFallback(wire.recipient_key, { encrypt, plain, lookup: this.autoEncrypt }, post)).result
  }

  /**
   * Publishes in your profile that you read encrypted messages (`metadata.encryption`), keeping the rest
   * of your metadata; `require: true` also asks the relay to refuse plaintext sends to you.
   */
  async declareEncryption(opts: { require?: boolean } = {}): Promise<AgentJson> {
    const me = await this.getAgent()
    const metadata = { ...me.metadata, [ENCRYPTION_METADATA_KEY]: encryptionDeclaration(opts.require ?? false) }
    return this.updateProfile({ metadata })
  }

  /** One page of your inbox, oldest first; returned `sent` messages become `delivered`. Encrypted ones come decrypted. */
  async poll(query: PollQuery = {}): Promise<ReceivedPageJson> {
    return this.openedPage(await this.transport.json('GET', '/v1/messages' + buildQuery(query as Query)))
  }

  /** Every page from `query` on (following next_cursor) until has_more is false. */
  async *pollPages(query: PollQuery = {}): AsyncGenerator<ReceivedPageJson> {
    let cursor = query.cursor
    for (;;) {
      const page = await this.poll({ ...query, cursor })
      yield page
      if (!page.has_more || !page.next_cursor) return
      cursor = page.next_cursor
    }
  }

  /** A message you sent or received; reading one addressed to you marks it delivered. */
  async getMessage(messageId: string): Promise<ReceivedMessageJson> {
    return this.opened(await this.transport.json<MessageJson>('GET', `/v1/messages/${encodeURIComponent(messageId)}`))
  }

  messageStatus(messageId: string): Promise<MessageStatusJson> {
    return this.transport.json('GET', `/v1/messages/${encodeURIComponent(messageId)}/status`)
  }

  /** One page of a thread's messages that you sent or received, oldest first. */
  async thread(threadId: string, query: PageQuery = {}): Promise<ReceivedPageJson> {
    return this.openedPage(await this.transport.json('GET', `/v1/messages/threads/${encodeURIComponent(threadId)}` + buildQuery(query as Query)))
  }

  // --- blobs ---
  /**
   * Uploads bytes, a file (by path), a Blob or a stream. The signature covers the SHA-256 of the bytes,
   * so the content is hashed first and then streamed (a one-shot stream is spooled to a temp file in
   * between; nothing is held whole in memory). Resolves with the blob (201 new, 200 when you already
   * owned identical content); `onProgress` sees the bytes sent so far.
   */
  async uploadBlob(source: BlobSource, opts: { contentType?: string; onProgress?: (sentBytes: number) => void } = {}): Promise<BlobJson> {
    return this.uploadPrepared(await prepareBlobSource(source), opts)
  }

  private async uploadPrepared(prepared: PreparedBlob, opts: { contentType?: string; onProgress?: (sentBytes: number) => void }): Promise<BlobJson> {
    try {
      const t = this.transport
      const path = '/v1/blobs'
      const onProgress = opts.onProgress
      // a fresh signature and a fresh read of the bytes for each attempt
      const build = () => {
        const headers: Record<string, string> = {
          ...signRequest(t.keys, 'POST', path, undefined, t.nextTimestamp(), prepared.hashBase64Url),
          'content-type': opts.contentType ?? prepared.contentType ?? 'application/octet-stream',
          'content-length': String(prepared.size),
        }
        let body = prepared.body(onProgress)
        // a body that reports its own progress is a stream; a Blob is watched as it is read
        if (onProgress && prepared.size > 0 && body instanceof Blob) {
          let sent = 0
          body = body.stream().pipeThrough(
            new TransformStream<Uint8Array, Uint8Array>({
              transform(chunk, controller) {
                sent += chunk.byteLength
                onProgress(sent)
                controller.enqueue(chunk)
              },
            }),
          )
        }
        return new Request(t.baseUrl + path, { method: 'POST', headers, body, duplex: 'half' } as RequestInit)
      }
      const res = await t.sendWithRetry('POST', path, build)
      const blob = await readJson<BlobJson>(res, t.baseUrl)
      this.encryption.noteUpload(blob.blob_id, res.status === 201)
      return blob
    } finally {
      await prepared.cleanup()
    }
  }

  /**
   * A blob's bytes as a streamed Response (read `body` chunk by chunk, or `arrayBuffer()` for small
   * ones). `range` asks for part of it: `{ start, end? }` (end inclusive) or `{ suffix }` (the last N
   * bytes); the answer is then 206. Errors throw RelayApiError.
   */
  async downloadBlob(blobId: string, opts: { range?: { start: number; end?: number } | { suffix: number } } = {}): Promise<Response> {
    const headers: Record<string, string> = {}
    const r = opts.range
    if (r) headers.range = 'suffix' in r ? `bytes=-${r.suffix}` : `bytes=${r.start}-${r.end ?? ''}`
    const t = this.transport
    const path = `/v1/blobs/${encodeURIComponent(blobId)}`
    const res = await t.sendWithRetry('GET', path, () => t.buildRequest('GET', path, undefined, headers))
    if (!res.ok) await readJson(res, t.baseUrl)
    assertRelayAnswer(res, t.baseUrl)
    return res
  }

  /**
   * Downloads a whole blob into `path`: written beside it under a temporary name and renamed once the
   * bytes match the blob's SHA-256, so `path` is never left half-written. An existing file is kept
   * (the call fails) unless `overwrite` is true.
   */
  async downloadToFile(blobId: string, path: string, opts: { overwrite?: boolean; onProgress?: (receivedBytes: number) => void } = {}): Promise<DownloadedFile> {
    return writeBlobToFile(await this.downloadBlob(blobId), blobId, path, opts)
  }

  /**
   * Encrypts a file, bytes, Blob or stream for `recipientKey` and uploads the ciphertext, in constant
   * memory: a fresh data-encryption key, the segmented cipher, the key wrapped for the recipient (v3 when
   * it declares it, else v2, or `version`). Put `attachment` in the message's attachments. The stored
   * blob's size and hash are the ciphertext's; `onProgress` sees ciphertext bytes sent. A file, Blob or
   * bytes is encrypted twice (once to hash the ciphertext the request signs, once while sending) and
   * nothing is written anywhere; only a one-shot stream has its ciphertext spooled to a temporary file.
   */
  async uploadEncryptedBlob(
    source: BlobSource,
    opts: { recipientKey: string; version?: EncryptionVersion; onProgress?: (sentBytes: number) => void },
  ): Promise<EncryptedUpload> {
    const version = opts.version ?? (await this.encryption.versionFor(opts.recipientKey, { encrypt: true }))!
    const dek = this.encryption.api.newDek()
    const upload = { contentType: 'application/octet-stream', onProgress: opts.onProgress }
    let blob: BlobJson
    let plainSize = 0
    if (source instanceof ReadableStream) {
      // a one-shot stream cannot be read twice: its ciphertext is spooled (hashed on the way) and sent
      const counted = source.pipeThrough(
        new TransformStream<Uint8Array, Uint8Array>({
          transform(chunk, controller) {
            plainSize += chunk.byteLength
            controller.enqueue(chunk)
          },
        }),
      )
      blob = await this.uploadBlob(this.encryption.api.encryptBlobStream(dek, counted), upload)
    } else {
      // a file, Blob or bytes is encrypted twice instead — once to hash, once to send — and never copied
      const prepared = await prepareEncryptedUpload(this.encryption.api.blobSealer(dek), source)
      plainSize = prepared.plainSize
      blob = await this.uploadPrepared(prepared, upload)
    }
    const wrapped = this.encryption.api.wrapDek({ version, dek, sender: this.transport.keys, recipientKey: opts.recipientKey })
    // no filename: the relay would see it in the clear (docs/protocol.md §14.5)
    const attachment = { blob_id: blob.blob_id, encrypted: true as const, ...wrapped }
    return { blob, attachment, plain_size: plainSize }
  }

  /**
   * The plaintext of an encrypted attachment of `message` as a stream, decrypted while it downloads; the
   * stream errors with DecryptError (with a reason) if the bytes were changed, cut or are not for you.
   * Throws DecryptError `unauthenticated`, before downloading, when nothing proves the sender wrapped its
   * key: the message's encrypted body did not open, or does not sign it, or — with no encrypted body — the
   * key is not wrapped in HPKE Auth mode (docs/protocol.md §14.5).
   */
  async downloadDecrypted(message: AttachmentMessage, attachment: AttachmentJson): Promise<ReadableStream<Uint8Array>> {
    const dek = this.encryption.attachmentKey(message, attachment)
    const res = await this.downloadBlob(attachment.blob_id)
    return this.encryption.api.decryptBlobStream(dek, res.body ?? new Blob([]).stream())
  }

  /** downloadDecrypted into `path`, renamed into place only once every segment authenticated. */
  async downloadDecryptedToFile(
    message: AttachmentMessage,
    attachment: AttachmentJson,
    path: string,
    opts: { overwrite?: boolean; onProgress?: (receivedBytes: number) => void } = {},
  ): Promise<DownloadedFile> {
    const opener = this.encryption.api.blobOpener(this.encryption.attachmentKey(message, attachment))
    const res = await this.downloadBlob(attachment.blob_id)
    return writeBatchesToFile(decryptedBatches(opener, res.body), { blobId: attachment.blob_id, path, contentType: 'application/octet-stream' }, opts)
  }

  /** A blob's size, content type and hash without its bytes (HEAD). */
  async blobInfo(blobId: string): Promise<{ blob_id: string; size: number; content_type: string; hash: string }> {
    const res = await this.transport.send('HEAD', `/v1/blobs/${encodeURIComponent(blobId)}`)
    assertRelayAnswer(res, this.transport.baseUrl)
    if (!res.ok) {
      // a HEAD answer has no body: the status is all there is
      throw new RelayApiError(res.status, res.status === 404 ? 'blob_not_found' : 'http_error', `HTTP ${res.status}`, null, res.headers.get('x-request-id'))
    }
    return {
      blob_id: blobId,
      size: Number(res.headers.get('content-length')),
      content_type: res.headers.get('content-type') ?? 'application/octet-stream',
      hash: res.headers.get('x-m2m-blob-hash') ?? '',
    }
  }

  /** Deletes your blob (refused with 409 blob_referenced while an unexpired message attaches it). */
  deleteBlob(blobId: string): Promise<void> {
    return this.transport.json('DELETE', `/v1/blobs/${encodeURIComponent(blobId)}`)
  }

  // --- access control: always your own ---
  readonly acl = {
    /** Your entries, newest first. */
    list: (entryType?: AclEntryType): Promise<AclEntryJson[]> =>
      this.transport.json('GET', `/v1/agents/${this.publicKey}/acl` + buildQuery({ entry_type: entryType })),
    get: (peerKey: string): Promise<AclEntryJson> =>
      this.transport.json('GET', `/v1/agents/${this.publicKey}/acl/${encodeURIComponent(peerKey)}`),
    /** Creates or changes the entry for a peer. */
    put: (peerKey: string, entryType: AclEntryType): Promise<AclEntryJson> =>
      this.transport.json('PUT', `/v1/agents/${this.publicKey}/acl/${encodeURIComponent(peerKey)}`, { entry_type: entryType }),
    delete: (peerKey: string): Promise<void> =>
      this.transport.json('DELETE', `/v1/agents/${this.publicKey}/acl/${encodeURIComponent(peerKey)}`),
    allow: (peerKey: string) => this.acl.put(peerKey, 'allow'),
    block: (peerKey: string) => this.acl.put(peerKey, 'block'),
  }

  // --- WebSocket ---
  /** One authenticated WebSocket: pushed messages, acks, sends answered by send_result, pings. */
  connect(opts: SocketOptions = {}): Promise<RelaySocket> {
    return RelaySocket.connect(this.transport, opts)
  }

  /**
   * Receives your messages as they arrive until `signal` aborts: keeps a WebSocket open, reconnecting
   * with exponential backoff and a fresh auth frame, and acks each message once `onMessage` resolved
   * (unless `autoAck: false`). A message whose handler throws stays `sent` and comes again later.
   */
  async listen(opts: ClientListenOptions): Promise<void> {
    await this.transport.prelude()
    if (!this.decrypt) return listenLoop(this.transport, opts)
    // decryption never throws: a message that does not open reaches the handler marked with the reason
    return listenLoop(this.transport, { ...opts, onMessage: (message, socket) => opts.onMessage(this.opened(message), socket) })
  }

  // --- webhooks: always your own ---
  /** Registers or replaces your webhook; `secret` is unpadded base64url of 32 random bytes. */
  setWebhook(url: string, secret: string): Promise<WebhookConfigJson> {
    return this.transport.json('PUT', `/v1/agents/${this.publicKey}/webhook`, { url, secret })
  }

  getWebhook(): Promise<WebhookConfigJson> {
    return this.transport.json('GET', `/v1/agents/${this.publicKey}/webhook`)
  }

  /** Removes your webhook; its pending deliveries are cancelled. */
  deleteWebhook(): Promise<void> {
    return this.transport.json('DELETE', `/v1/agents/${this.publicKey}/webhook`)
  }

  /** Any signed call, for endpoints without a helper. */
  call<T>(method: string, path: string, query?: Parameters<typeof buildQuery>[0], body?: unknown): Promise<T> {
    return this.transport.json<T>(method, path + buildQuery(query), body)
  }
}

/**
 * Decrypted segments written per batch: the client's peak memory grows with the batch (measured over
 * 100 MiB: about +30 MiB at 256 KiB, +45 MiB at 1 MiB, +65 MiB at 4 MiB), the throughput does not.
 */
const DOWNLOAD_BATCH_BYTES = 256 * 1024

/** Decrypted segments of a downloading blob, a batch at a time (each authenticated before it is given out). */
async function* decryptedBatches(opener: BlobOpener, body: ReadableStream<Uint8Array> | null): AsyncGenerator<Uint8Array[]> {
  let batch: Uint8Array[] = []
  let bytes = 0
  if (body) {
    for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
      const before = batch.length
      opener.push(chunk, batch)
      for (let i = before; i < batch.length; i++) bytes += batch[i]!.byteLength
      if (bytes >= DOWNLOAD_BATCH_BYTES) {
        yield batch
        batch = []
        bytes = 0
      }
    }
  }
  batch.push(opener.finish())
  yield batch
}
