/** Helpers shared by the blob tests: raw uploads (bytes or streams, signed by hand) and what is on disk. */
import { readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { bodyHash } from '../../src/auth/canonical.ts'
import { signRequest, type KeyPair } from '../../src/auth/sign.ts'
import type { BlobJson, RelayClient } from '../../src/client/index.ts'
import { BASE_URL, type TestRelay } from '../support/harness.ts'
import { uniqueTimestamp } from '../support/signed.ts'

export const enc = (s: string) => new TextEncoder().encode(s)
export const sha256Hex = (b: Uint8Array | string) => new Bun.CryptoHasher('sha256').update(b).digest('hex')
export const BLOB_ID = /^blob_[0-9a-f]{24}$/
/** A response body as JSON, untyped (tests look at every field). */
export const json = (res: Response): Promise<any> => res.json()

export interface RawUpload {
  /** What is sent; defaults to `bytes`. A stream is sent without Content-Length. */
  body?: Uint8Array | ReadableStream<Uint8Array>
  /** What the signature covers; defaults to `bytes`. */
  signedBytes?: Uint8Array
  contentType?: string | null
  headers?: Record<string, string>
  path?: string
}

/** A signed POST /v1/blobs Request built by hand, so tests can tamper with any part of it. */
export function uploadRequest(t: TestRelay, keys: KeyPair, bytes: Uint8Array, opts: RawUpload = {}): Request {
  const path = opts.path ?? '/v1/blobs'
  const timestamp = uniqueTimestamp(t.clock.now(), keys.publicKey)
  const headers: Record<string, string> = {
    ...signRequest(keys, 'POST', path, undefined, timestamp, bodyHash(opts.signedBytes ?? bytes)),
    ...opts.headers,
  }
  const type = opts.contentType === undefined ? 'application/octet-stream' : opts.contentType
  if (type !== null) headers['content-type'] = type
  return new Request(BASE_URL + path, { method: 'POST', headers, body: opts.body ?? bytes, duplex: 'half' } as unknown as RequestInit)
}

export const keysOf = (c: RelayClient): KeyPair => c.transport.keys

export function rawUpload(t: TestRelay, c: RelayClient, bytes: Uint8Array, opts: RawUpload = {}): Promise<Response> {
  return t.handle(uploadRequest(t, keysOf(c), bytes, opts))
}

/** A body that arrives in `chunkSize` pieces, without Content-Length (like chunked transfer encoding). */
export function chunked(bytes: Uint8Array, chunkSize = 1000): ReadableStream<Uint8Array> {
  let at = 0
  return new ReadableStream({
    pull(controller) {
      if (at >= bytes.length) return controller.close()
      controller.enqueue(bytes.slice(at, at + chunkSize))
      at += chunkSize
    },
  })
}

/** Random bytes (different content every call). */
export function randomContent(size: number): Uint8Array {
  const b = new Uint8Array(size)
  crypto.getRandomValues(b.subarray(0, Math.min(size, 65536)))
  for (let i = 65536; i < size; i += 65536) b.set(b.subarray(0, Math.min(65536, size - i)), i)
  return b
}

/** Every file under a directory, as paths relative to it. */
export function filesUnder(dir: string): string[] {
  const out: string[] = []
  const walk = (d: string, prefix: string) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name)
      if (statSync(p).isDirectory()) walk(p, prefix + name + '/')
      else out.push(prefix + name)
    }
  }
  walk(dir, '')
  return out.sort()
}

export const blobFiles = (t: TestRelay) => filesUnder(t.relay.paths.blobs)
export const tempFiles = (t: TestRelay) => filesUnder(t.relay.paths.tmp)

export function blobRecords(t: TestRelay): Promise<{ blob_id: string; owner_key: string; hash: string; size_bytes: number; expires_at: number }[]> {
  return t.sql('SELECT blob_id, owner_key, hash, size_bytes, expires_at FROM blobs ORDER BY created_at, blob_id')
}

export async function uploadText(c: RelayClient, text: string, contentType = 'text/plain'): Promise<BlobJson> {
  return c.uploadBlob(enc(text), { contentType })
}

export const sweep = (t: TestRelay) => t.relay.scheduler.runNow('sweep-blobs') as Promise<{ expired_records: number; files_removed: number }>
