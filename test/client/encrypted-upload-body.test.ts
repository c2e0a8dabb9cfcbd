/**
 * The streamed body of an encrypted upload reuses a few chunk buffers in Bun, which is sound only
 * while Bun's fetch is done with a chunk before it asks for the next few. These tests send that body
 * to a real server on a socket that reads slowly (so the socket fills and Bun must hold what it could
 * not write) and check every byte that arrived against the ciphertext's hash and a decryption.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createHash } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { prepareEncryptedUpload } from '../../src/client/encrypted-source.ts'
import { bindEncryption } from '../../src/crypto/index.ts'
import { nativePrimitives } from '../../src/crypto/native.ts'

const e2e = bindEncryption(nativePrimitives)
let server: ReturnType<typeof Bun.serve>
let dir: string
// what the server received, by request
const received = new Map<string, Uint8Array>()

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'relay-upload-body-'))
  server = Bun.serve({
    port: 0,
    maxRequestBodySize: 64 * 1024 * 1024,
    async fetch(req) {
      const parts: Uint8Array[] = []
      let n = 0
      for await (const chunk of req.body as unknown as AsyncIterable<Uint8Array>) {
        parts.push(new Uint8Array(chunk))
        // pause now and then, so the client's socket fills and its fetch has to wait with a chunk in hand
        if (++n % 8 === 0) await Bun.sleep(3)
      }
      const id = new URL(req.url).searchParams.get('id')!
      received.set(id, Buffer.concat(parts))
      return new Response(createHash('sha256').update(received.get(id)!).digest('hex'))
    },
  })
})

afterAll(() => {
  server.stop(true)
  rmSync(dir, { recursive: true, force: true })
})

async function send(id: string, source: string | Uint8Array) {
  const dek = e2e.newDek()
  const prepared = await prepareEncryptedUpload(e2e.blobSealer(dek), source)
  const res = await fetch(`http://127.0.0.1:${server.port}/?id=${id}`, {
    method: 'POST',
    headers: { 'content-length': String(prepared.size) },
    body: prepared.body(),
    duplex: 'half',
  } as RequestInit)
  return { dek, prepared, hash: await res.text(), bytes: received.get(id)! }
}

describe('the streamed body of an encrypted upload', () => {
  test('a 12 MiB file read slowly on the other end arrives byte for byte as hashed, and decrypts', async () => {
    const plain = crypto.getRandomValues(new Uint8Array(12 * 1024 * 1024 + 12345))
    const path = join(dir, 'plain.bin')
    writeFileSync(path, plain)
    const { dek, prepared, hash, bytes } = await send('file', path)
    expect(bytes.length).toBe(prepared.size)
    expect(hash).toBe(prepared.hashHex)
    expect(Buffer.from(await e2e.decryptBlob(dek, bytes)).equals(plain)).toBe(true)
  })

  test('bytes in memory, and a second request from the same preparation, arrive the same', async () => {
    const plain = crypto.getRandomValues(new Uint8Array(3 * 1024 * 1024 + 7))
    const { prepared, hash } = await send('bytes', plain)
    expect(hash).toBe(prepared.hashHex)
    // a retry builds a fresh body from the same preparation
    const again = await fetch(`http://127.0.0.1:${server.port}/?id=again`, {
      method: 'POST',
      headers: { 'content-length': String(prepared.size) },
      body: prepared.body(),
      duplex: 'half',
    } as RequestInit)
    expect(await again.text()).toBe(prepared.hashHex)
  })
})
