/**
 * A typed client for the relay: signs every request and covers every endpoint. The command line, the
 * MCP bridge and the tests use it; other agents install it as a package (`@agent-relay/client`) and run
 * it on Node ≥ 20 or Bun.
 */
import { signRequest } from '../auth/sign.ts'
import { prepareBlobSource, type BlobSource } from './blob-source.ts'
import { writeBlobToFile, type DownloadedFile } from './blob-file.ts'
import { RelaySocket, listenLoop, type ListenOptions, type SocketOptions } from './socket.ts'
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
  MessagePageJson,
  MessageStatusJson,
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
export { RelaySocket, wsUrl, type ListenOptions, type SocketClosed, type SocketOptions, type WebSocketConstructor, type WebSocketLike } from './socket.ts'
export { WebhookVerificationError, verifyWebhook, type VerifyWebhookInput } from './webhook-verify.ts'
export type * from './types.ts'

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

  constructor(opts: ClientOptions) {
    this.transport = new Transport(opts)
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
  /** Sends a message; resolves once the relay has committed it. */
  send(message: SendMessageInput): Promise<SendResultJson> {
    return this.transport.json('POST', '/v1/messages', message)
  }

  /** One page of your inbox, oldest first; returned `sent` messages become `delivered`. */
  poll(query: PollQuery = {}): Promise<MessagePageJson> {
    return this.transport.json('GET', '/v1/messages' + buildQuery(query as Query))
  }

  /** Every page from `query` on (following next_cursor) until has_more is false. */
  async *pollPages(query: PollQuery = {}): AsyncGenerator<MessagePageJson> {
    let cursor = query.cursor
    for (;;) {
      const page = await this.poll({ ...query, cursor })
      yield page
      if (!page.has_more || !page.next_cursor) return
      cursor = page.next_cursor
    }
  }

  /** A message you sent or received; reading one addressed to you marks it delivered. */
  getMessage(messageId: string): Promise<MessageJson> {
    return this.transport.json('GET', `/v1/messages/${encodeURIComponent(messageId)}`)
  }

  messageStatus(messageId: string): Promise<MessageStatusJson> {
    return this.transport.json('GET', `/v1/messages/${encodeURIComponent(messageId)}/status`)
  }

  /** One page of a thread's messages that you sent or received, oldest first. */
  thread(threadId: string, query: PageQuery = {}): Promise<MessagePageJson> {
    return this.transport.json('GET', `/v1/messages/threads/${encodeURIComponent(threadId)}` + buildQuery(query as Query))
  }

  // --- blobs ---
  /**
   * Uploads bytes, a file (by path), a Blob or a stream. The signature covers the SHA-256 of the bytes,
   * so the content is hashed first and then streamed (a one-shot stream is spooled to a temp file in
   * between; nothing is held whole in memory). Resolves with the blob (201 new, 200 when you already
   * owned identical content); `onProgress` sees the bytes sent so far.
   */
  async uploadBlob(source: BlobSource, opts: { contentType?: string; onProgress?: (sentBytes: number) => void } = {}): Promise<BlobJson> {
    const prepared = await prepareBlobSource(source)
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
        let body: ReadableStream<Uint8Array> | Blob = prepared.blob
        if (onProgress && prepared.size > 0) {
          let sent = 0
          body = prepared.blob.stream().pipeThrough(
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
      return await readJson<BlobJson>(await t.sendWithRetry('POST', path, build), t.baseUrl)
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
  listen(opts: ListenOptions): Promise<void> {
    return listenLoop(this.transport, opts)
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

