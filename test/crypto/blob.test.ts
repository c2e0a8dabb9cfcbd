// The segmented attachment cipher and the wrapped keys: sizes, round trips across primitive sets,
// and refusal of every kind of change.
import { describe, expect, test } from 'bun:test'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { bindEncryption, DecryptError, decryptedBlobSize, encryptedBlobSize } from '../../src/crypto/index.ts'
import { toHex } from '../../src/crypto/bytes.ts'
import { nativePrimitives } from '../../src/crypto/native.ts'
import { purePrimitives } from '../../src/crypto/pure.ts'

const native = bindEncryption(nativePrimitives)
const pure = bindEncryption(purePrimitives)
const SEG = 64 * 1024
const alice = generateKeyPair()
const bob = generateKeyPair()

async function reasonOf(p: Promise<unknown>): Promise<string> {
  try {
    await p
  } catch (err) {
    if (err instanceof DecryptError) return err.reason
    throw err
  }
  return 'opened'
}

describe('attachment cipher', () => {
  for (const size of [0, 1, SEG - 1, SEG, SEG + 1, 3 * SEG, 3 * SEG + 7]) {
    test(`${size} bytes: native encrypts, pure decrypts and back; the stored size is predicted`, async () => {
      const pt = crypto.getRandomValues(new Uint8Array(size))
      const dek = native.newDek()
      const ct = await native.encryptBlob(dek, pt)
      expect(ct.length).toBe(encryptedBlobSize(size))
      expect(decryptedBlobSize(ct.length)).toBe(size)
      expect(toHex(await pure.decryptBlob(dek, ct))).toBe(toHex(pt))
      expect(toHex(await native.decryptBlob(dek, await pure.encryptBlob(dek, pt)))).toBe(toHex(pt))
    })
  }

  test('the overhead the documents quote: 25,617 bytes on a 100 MiB file; sizes map back', () => {
    expect(encryptedBlobSize(100 * 1024 * 1024) - 100 * 1024 * 1024).toBe(25_617)
    for (const size of [0, 1, 65_535, 65_536, 65_537, 100 * 1024 * 1024]) expect(decryptedBlobSize(encryptedBlobSize(size))).toBe(size)
  })

  test('a sealer with a given salt seals the same plaintext to the same bytes, and the stream format reads them', async () => {
    for (const p of [nativePrimitives, purePrimitives]) {
      const e2e = bindEncryption(p)
      const dek = e2e.newDek()
      const salt = new Uint8Array(16).fill(7)
      const plain = crypto.getRandomValues(new Uint8Array(65_536 + 10))
      const seal = () => {
        const s = e2e.blobSealer(dek, salt)
        const first = new Uint8Array(65_536 + 16)
        s.seal(0, false, plain.subarray(0, 65_536), first)
        return toHex(new Uint8Array([...s.header, ...first, ...s.seal(1, true, plain.subarray(65_536))]))
      }
      const a = seal()
      expect(seal()).toBe(a)
      const opened = await e2e.decryptBlob(dek, Uint8Array.from(Buffer.from(a, 'hex')))
      expect(toHex(opened)).toBe(toHex(plain))
      // a short segment that is not the last is refused
      expect(() => e2e.blobSealer(dek, salt).seal(0, false, plain.subarray(0, 10))).toThrow()
    }
  })

  test('a segment sealed detached (ciphertext and tag apart) is the same bytes, with the native and the pure primitives', () => {
    const dek = bindEncryption(nativePrimitives).newDek()
    const salt = new Uint8Array(16).fill(9)
    const plain = crypto.getRandomValues(new Uint8Array(65_536))
    const cases: [number, boolean, Uint8Array][] = [[0, false, plain], [1, true, plain.subarray(0, 100)], [0, true, plain.subarray(0, 0)], [70_000, true, plain]]
    for (const [index, last, pt] of cases) {
      const whole = toHex(bindEncryption(purePrimitives).blobSealer(dek, salt).seal(index, last, pt))
      for (const p of [nativePrimitives, purePrimitives]) {
        const [ciphertext, tag] = bindEncryption(p).blobSealer(dek, salt).sealDetached(index, last, pt)
        expect(ciphertext.length).toBe(pt.length)
        expect(tag.length).toBe(16)
        expect(toHex(ciphertext) + toHex(tag)).toBe(whole)
      }
    }
    expect(() => bindEncryption(nativePrimitives).blobSealer(dek, salt).sealDetached(0, false, plain.subarray(0, 10))).toThrow()
  })

  test('chunking of the input does not matter', async () => {
    const pt = crypto.getRandomValues(new Uint8Array(2 * SEG + 100))
    const dek = native.newDek()
    const source = new ReadableStream<Uint8Array>({
      start(c) {
        for (let at = 0; at < pt.length; at += 777) c.enqueue(pt.slice(at, at + 777))
        c.close()
      },
    })
    const ct = new Uint8Array(await new Response(native.encryptBlobStream(dek, source)).arrayBuffer())
    expect(toHex(await native.decryptBlob(dek, ct))).toBe(toHex(pt))
  })

  test('a flipped byte anywhere, a wrong key, a cut, a dropped or swapped segment: each refused', async () => {
    const pt = crypto.getRandomValues(new Uint8Array(2 * SEG + 10))
    const dek = native.newDek()
    const ct = await native.encryptBlob(dek, pt)
    for (const at of [0, 1, 16, 17, 100, 17 + SEG + 15, 17 + SEG + 16 + 5, ct.length - 1]) {
      const bad = ct.slice()
      bad[at]! ^= 0x04
      expect(await reasonOf(native.decryptBlob(dek, bad))).not.toBe('opened')
    }
    expect(await reasonOf(native.decryptBlob(native.newDek(), ct))).toBe('authentication_failed')
    const seg = SEG + 16
    expect(await reasonOf(native.decryptBlob(dek, ct.subarray(0, 17 + 2 * seg)))).toBe('truncated')
    expect(await reasonOf(native.decryptBlob(dek, ct.subarray(0, ct.length - 3)))).toBe('authentication_failed')
    expect(await reasonOf(native.decryptBlob(dek, ct.subarray(0, 10)))).toBe('truncated')
    const swapped = new Uint8Array(ct.length)
    swapped.set(ct.subarray(0, 17))
    swapped.set(ct.subarray(17 + seg, 17 + 2 * seg), 17)
    swapped.set(ct.subarray(17, 17 + seg), 17 + seg)
    swapped.set(ct.subarray(17 + 2 * seg), 17 + 2 * seg)
    expect(await reasonOf(native.decryptBlob(dek, swapped))).toBe('authentication_failed')
    const dropped = new Uint8Array([...ct.subarray(0, 17), ...ct.subarray(17 + seg)])
    expect(await reasonOf(native.decryptBlob(dek, dropped))).toBe('authentication_failed')
  })
})

describe('wrapped attachment keys', () => {
  for (const version of [2, 3] as const) {
    test(`v${version}: the recipient unwraps; flipping any byte of dek_enc or dek_ct is refused`, () => {
      const dek = native.newDek()
      const wrapped = native.wrapDek({ version, dek, sender: alice, recipientKey: bob.publicKey })
      const got = pure.unwrapDek(bob, alice.publicKey, wrapped)
      expect(toHex(got.dek)).toBe(toHex(dek))
      expect(got.version).toBe(version)
      for (const field of ['dek_enc', 'dek_ct'] as const) {
        const raw = Buffer.from(wrapped[field], 'base64url')
        for (let i = 0; i < raw.length; i++) {
          const bad = Buffer.from(raw)
          bad[i]! ^= 0x02
          expect(() => native.unwrapDek(bob, alice.publicKey, { ...wrapped, [field]: bad.toString('base64url') })).toThrow(DecryptError)
        }
      }
    })
  }

  test('v2 wrapping names the sender; nobody else unwraps', () => {
    const wrapped = native.wrapDek({ version: 2, dek: native.newDek(), sender: alice, recipientKey: bob.publicKey })
    expect(() => native.unwrapDek(bob, generateKeyPair().publicKey, wrapped)).toThrow(DecryptError)
    expect(() => native.unwrapDek(alice, alice.publicKey, wrapped)).toThrow(DecryptError)
  })
})
