/**
 * The console's attachment cipher (src/console/app/attachment-cipher.ts) outside the browser: Bun has the
 * same WebCrypto (HKDF, AES-256-GCM). What it encrypts, the client's native code decrypts, and the other
 * way round, for sizes around the 64 KiB segment and the 1 MiB read block; every segment is one WebCrypto
 * call; the hash it returns is the SHA-256 of the stored bytes (what the upload signs); and each change
 * the native reader refuses, it refuses with the same reason.
 */
import { afterEach, describe, expect, spyOn, test } from 'bun:test'
import { createHash } from 'node:crypto'
import { join } from 'node:path'
import { bindEncryption, DecryptError, encryptedBlobSize } from '../../src/crypto/index.ts'
import { nativePrimitives } from '../../src/crypto/native.ts'
import { ROOT } from '../support/binary.ts'

// browser code, checked with its own tsconfig (DOM types): loaded by path so the project check leaves it out
const { openFile, sealFile } = await import(join(ROOT, 'src/console/app/attachment-cipher.ts'))
const { sha256OfBlob } = await import(join(ROOT, 'src/console/app/blob-io.ts'))

const native = bindEncryption(nativePrimitives)
const SEG = 64 * 1024
const CSEG = SEG + 16
const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex')
const bytesOf = async (b: Blob) => new Uint8Array(await b.arrayBuffer())

/** The reason a decryption gives up, or 'opened'. */
async function reasonOf(run: () => Promise<unknown>): Promise<string> {
  try {
    await run()
    return 'opened'
  } catch (err) {
    if (err instanceof DecryptError) return err.reason
    throw err
  }
}

afterEach(() => {
  // a spy left on WebCrypto would count the next test's calls
  ;(crypto.subtle.encrypt as any).mockRestore?.()
  ;(crypto.subtle.decrypt as any).mockRestore?.()
})

describe('console attachment cipher (WebCrypto)', () => {
  for (const size of [0, 1, SEG - 1, SEG, SEG + 1, 16 * SEG, 16 * SEG + 1, 40 * SEG + 5]) {
    test(`${size} bytes: the console encrypts, the native code decrypts, and back; one WebCrypto call per segment`, async () => {
      const plain = crypto.getRandomValues(new Uint8Array(size))
      const dek = native.newDek()
      const encrypt = spyOn(crypto.subtle, 'encrypt')
      const progress: number[] = []
      const sealed = await sealFile(dek, new Blob([plain]), (n: number) => progress.push(n))
      const segments = Math.max(1, Math.ceil(size / SEG))
      expect(encrypt).toHaveBeenCalledTimes(segments)
      expect(progress.at(-1)).toBe(size)
      const stored = await bytesOf(sealed.body)
      expect([sealed.size, stored.length]).toEqual([encryptedBlobSize(size), encryptedBlobSize(size)])
      expect(Buffer.from(sealed.sha256).toString('hex')).toBe(sha256(stored))
      expect(sha256(await native.decryptBlob(dek, stored))).toBe(sha256(plain))

      const decrypt = spyOn(crypto.subtle, 'decrypt')
      const opened = await bytesOf(await openFile(dek, new Blob([await native.encryptBlob(dek, plain)])))
      expect(decrypt).toHaveBeenCalledTimes(segments)
      expect(sha256(opened)).toBe(sha256(plain))
    })
  }

  test('a fresh salt each time: the same file never encrypts to the same bytes', async () => {
    const dek = native.newDek()
    const file = new Blob([new Uint8Array(1000)])
    expect(Buffer.from((await sealFile(dek, file)).sha256).toString('hex')).not.toBe(Buffer.from((await sealFile(dek, file)).sha256).toString('hex'))
  })

  test('every change the native reader refuses is refused with the same reason', async () => {
    const dek = native.newDek()
    const stored = await native.encryptBlob(dek, crypto.getRandomValues(new Uint8Array(3 * SEG + 100)))
    const changed = (at: number) => {
      const b = stored.slice()
      b[at]! ^= 1
      return b
    }
    const swapped = stored.slice()
    swapped.set(stored.subarray(17, 17 + CSEG), 17 + CSEG)
    swapped.set(stored.subarray(17 + CSEG, 17 + 2 * CSEG), 17)
    const cases: [string, Uint8Array, Uint8Array, string][] = [
      ['a byte of a middle segment', dek, changed(17 + CSEG + 5), 'authentication_failed'],
      ['a byte of a tag', dek, changed(stored.length - 1), 'authentication_failed'],
      ['a byte of the salt', dek, changed(3), 'authentication_failed'],
      ['two segments swapped', dek, swapped, 'authentication_failed'],
      ['another key', native.newDek(), stored, 'authentication_failed'],
      ['an unknown format', dek, changed(0), 'unsupported_version'],
      ['cut inside the last segment', dek, stored.slice(0, stored.length - 20), 'authentication_failed'],
      ['cut to less than a tag after whole segments', dek, stored.slice(0, 17 + 3 * CSEG + 10), 'truncated'],
      ['cut at a segment boundary', dek, stored.slice(0, 17 + 2 * CSEG), 'truncated'],
      ['only a header', dek, stored.slice(0, 17), 'truncated'],
      ['shorter than a header', dek, stored.slice(0, 9), 'truncated'],
    ]
    for (const [what, key, bytes, reason] of cases) {
      const got = { what, console: await reasonOf(() => openFile(key, new Blob([bytes]))), native: await reasonOf(() => native.decryptBlob(key, bytes)) }
      expect(got).toEqual({ what, console: reason, native: reason })
    }
    expect(await reasonOf(() => openFile(dek, new Blob([stored])))).toBe('opened')
  })

  test('a file is hashed in blocks to the SHA-256 of its bytes', async () => {
    for (const size of [0, 5, 1024 * 1024, 2 * 1024 * 1024 + 3]) {
      const plain = crypto.getRandomValues(new Uint8Array(size))
      expect(Buffer.from(await sha256OfBlob(new Blob([plain]))).toString('hex')).toBe(sha256(plain))
    }
  })
})
