/**
 * Blobs over a real socket (relay on 127.0.0.1, port 0): aborted uploads, early refusals, HEAD through
 * Bun's server, and request targets that never pass through a URL parser on the client side.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { connect } from 'node:net'
import { bodyHash } from '../../src/auth/canonical.ts'
import { generateKeyPair, signRequest } from '../../src/auth/sign.ts'
import { RelayClient } from '../../src/client/index.ts'
import { startTestRelay, type TestRelay } from '../support/harness.ts'
import { uniqueTimestamp } from '../support/signed.ts'
import { blobFiles, blobRecords, json, randomContent, sha256Hex, tempFiles } from './helpers.ts'

const MAX = 4 * 1024 * 1024
let t: TestRelay
let port: number
let client: RelayClient
beforeAll(async () => {
  t = await startTestRelay({ host: '127.0.0.1', blobs: { maxSizeBytes: MAX } })
  port = (await t.relay.start()).port
  client = new RelayClient({ baseUrl: `http://127.0.0.1:${port}`, keys: generateKeyPair(), now: () => t.clock.now() })
})
afterAll(() => t.close())

/** Sends raw bytes on a new connection; resolves with everything the relay wrote back before closing. */
function rawHttp(chunks: (string | Uint8Array)[], opts: { closeAfterMs?: number } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1')
    let got = ''
    socket.on('data', (d) => (got += d.toString('latin1')))
    socket.on('error', reject)
    socket.on('close', () => resolve(got))
    socket.on('connect', () => {
      for (const c of chunks) socket.write(c)
      if (opts.closeAfterMs !== undefined) setTimeout(() => socket.destroy(), opts.closeAfterMs)
      else setTimeout(() => socket.end(), 300)
    })
  })
}

function uploadHead(bytesToSign: Uint8Array, extra: string): string {
  const keys = generateKeyPair()
  const ts = uniqueTimestamp(t.clock.now(), keys.publicKey)
  const h = signRequest(keys, 'POST', '/v1/blobs', undefined, ts, bodyHash(bytesToSign))
  return (
    `POST /v1/blobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\n` +
    Object.entries(h).map(([k, v]) => `${k}: ${v}\r\n`).join('') +
    extra +
    '\r\n'
  )
}

/** Waits (briefly, on real time) for the relay to notice a closed connection and clean up. */
async function until(cond: () => boolean, ms = 3000): Promise<void> {
  const end = Date.now() + ms
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time')
    await Bun.sleep(10)
  }
}

describe('aborted uploads leave nothing', () => {
  test('Content-Length body cut short by a closed connection', async () => {
    const bytes = randomContent(1024 * 1024)
    const records = (await blobRecords(t)).length
    await rawHttp([uploadHead(bytes, `Content-Length: ${bytes.length}\r\n`), bytes.subarray(0, 300_000)], { closeAfterMs: 100 })
    await until(() => t.relay.features.blobs.store.inFlight === 0 && tempFiles(t).length === 0)
    expect((await blobRecords(t))).toHaveLength(records)
    expect(blobFiles(t).some((f) => f.endsWith(sha256Hex(bytes)))).toBe(false)
  })

  test('chunked body cut short by a closed connection', async () => {
    const bytes = randomContent(200_000)
    const piece = bytes.subarray(0, 65536)
    await rawHttp([uploadHead(bytes, 'Transfer-Encoding: chunked\r\n'), `${piece.length.toString(16)}\r\n`, piece, '\r\n'], { closeAfterMs: 100 })
    await until(() => t.relay.features.blobs.store.inFlight === 0 && tempFiles(t).length === 0)
    expect(blobFiles(t).some((f) => f.endsWith(sha256Hex(bytes)))).toBe(false)
  })
})

describe('over the wire', () => {
  test('upload, HEAD and ranged GET through Bun.serve', async () => {
    const bytes = randomContent(MAX)
    const blob = await client.uploadBlob(bytes, { contentType: 'application/x-test' })
    expect(blob.size).toBe(MAX)
    const info = await client.blobInfo(blob.blob_id)
    expect(info).toEqual({ blob_id: blob.blob_id, size: MAX, content_type: 'application/x-test', hash: sha256Hex(bytes) })
    const whole = new Uint8Array(await (await client.downloadBlob(blob.blob_id)).arrayBuffer())
    expect(sha256Hex(whole)).toBe(sha256Hex(bytes))
    const part = await client.downloadBlob(blob.blob_id, { range: { start: 1000, end: 1999 } })
    expect(part.status).toBe(206)
    expect(part.headers.get('content-length')).toBe('1000')
    expect(sha256Hex(new Uint8Array(await part.arrayBuffer()))).toBe(sha256Hex(bytes.subarray(1000, 2000)))
  })

  test('a declared size over the limit is answered 413 at once, with the error envelope', async () => {
    const reply = await rawHttp([uploadHead(new Uint8Array(0), `Content-Length: ${MAX + 1}\r\n`)])
    expect(reply).toStartWith('HTTP/1.1 413')
    expect(reply).toContain('"code":"payload_too_large"')
    expect(tempFiles(t)).toEqual([])
  })

  test('a client streaming past the limit sees the 413 and stops', async () => {
    let sent = 0
    const body = new ReadableStream<Uint8Array>({
      pull(c) {
        if (sent > 4 * MAX) return c.close()
        sent += 65536
        c.enqueue(new Uint8Array(65536))
      },
    })
    const keys = generateKeyPair()
    const headers = signRequest(keys, 'POST', '/v1/blobs', undefined, uniqueTimestamp(t.clock.now(), keys.publicKey), bodyHash(new Uint8Array(4 * MAX)))
    const res = await fetch(`http://127.0.0.1:${port}/v1/blobs`, { method: 'POST', headers: { ...headers }, body, duplex: 'half' } as unknown as RequestInit)
    expect(res.status).toBe(413)
    expect((await json(res)).error.code).toBe('payload_too_large')
    expect(sent).toBeLessThan(4 * MAX)
    await until(() => tempFiles(t).length === 0)
  })

  test('request targets with dot segments and encoded slashes never reach a file', async () => {
    const keys = generateKeyPair()
    for (const target of ['/v1/blobs/..', '/v1/blobs/%2e%2e', '/v1/blobs/..%2F..%2Frelay.db', '/v1/blobs/blob_%2F..%2F..%2F..%2Frelay.db', `/v1/blobs/${'a'.repeat(8000)}`]) {
      const ts = uniqueTimestamp(t.clock.now(), keys.publicKey)
      const h = signRequest(keys, 'GET', target, undefined, ts)
      const reply = await rawHttp([`GET ${target} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n` + Object.entries(h).map(([k, v]) => `${k}: ${v}\r\n`).join('') + '\r\n'])
      const status = Number(reply.slice(9, 12))
      expect([target.slice(0, 40), status]).toEqual([target.slice(0, 40), 404])
      expect(reply).not.toContain('SQLite format')
    }
  })
})
