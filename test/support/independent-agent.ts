/**
 * An agent that speaks to a relay over plain fetch — signed requests (§1.1) and nothing else of the
 * relay's client — so the encrypted messages and attachments it sends and reads are encrypted and
 * decrypted only by the independent implementation (independent-hpke.ts, independent-blob.ts).
 */
import { signRequest, type KeyPair } from '../../src/auth/sign.ts'

export class IndependentAgent {
  private lastMs = 0

  constructor(
    readonly baseUrl: string,
    readonly keys: KeyPair,
  ) {}

  get publicKey(): string {
    return this.keys.publicKey
  }

  /** One signed request; the JSON answer, or an error naming the status and the relay's answer. */
  async request<T = any>(method: string, path: string, body?: Uint8Array | string, contentType = 'application/json'): Promise<T> {
    // each signature is accepted once: a fresh millisecond for every request of this agent
    this.lastMs = Math.max(Date.now(), this.lastMs + 1)
    const headers: Record<string, string> = { ...signRequest(this.keys, method, path, body, new Date(this.lastMs).toISOString()) }
    if (body !== undefined) headers['content-type'] = contentType
    const res = await fetch(this.baseUrl + path, { method, headers, body })
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`)
    return (res.headers.get('content-type')?.includes('json') ? res.json() : new Uint8Array(await res.arrayBuffer())) as Promise<T>
  }

  /** Publishes `metadata.encryption` (§14.6) with the versions this agent reads. */
  declare(versions: number[]): Promise<unknown> {
    return this.request('PATCH', `/v1/agents/${this.publicKey}`, JSON.stringify({ metadata: { encryption: { versions, require: false } } }))
  }

  /** Uploads stored bytes as they are; the blob id. */
  async upload(bytes: Uint8Array): Promise<string> {
    return (await this.request<{ blob_id: string }>('POST', '/v1/blobs', bytes, 'application/octet-stream')).blob_id
  }

  /** A blob's stored bytes. */
  download(blobId: string): Promise<Uint8Array> {
    return this.request<Uint8Array>('GET', `/v1/blobs/${blobId}`)
  }

  async send(message: Record<string, unknown>): Promise<string> {
    return (await this.request<{ message_id: string }>('POST', '/v1/messages', JSON.stringify(message))).message_id
  }

  getMessage(messageId: string): Promise<any> {
    return this.request('GET', `/v1/messages/${messageId}`)
  }
}
