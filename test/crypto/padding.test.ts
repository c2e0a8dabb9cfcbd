// v3 padding (docs/protocol.md §14.4): the padded length of the inner plaintext against the Padmé rule
// as the document writes it, computed here with integers; and what the project seals, opened and read by
// the independent implementation (@hpke/core, node:crypto).
import { describe, expect, test } from 'bun:test'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { bindEncryption } from '../../src/crypto/index.ts'
import { nativePrimitives } from '../../src/crypto/native.ts'
import { paddedLength } from '../../src/crypto/padding.ts'
import { openBase, unb64u } from '../support/independent-hpke.ts'
import { readV3Inner, V3_MESSAGE_INFO, v3UsedBytes } from '../support/independent-v3.ts'

const alice = generateKeyPair()
const bob = generateKeyPair()
const e2e = bindEncryption(nativePrimitives)

/**
 * §14.4 word for word: up to 256 → 256; above, with E = ⌊log2 L⌋ and S = ⌊log2 E⌋ + 1, L rounded up to
 * a multiple of 2^(E − S). In BigInt bit lengths, not the Math.log2 the source uses.
 */
function padmeFromDocs(length: number): number {
  if (length <= 256) return 256
  const L = BigInt(length)
  const E = BigInt(L.toString(2).length - 1)
  const S = BigInt(E.toString(2).length)
  const unit = 1n << (E - S)
  return Number(((L + unit - 1n) / unit) * unit)
}

/** 0…300, and 2^k − 1, 2^k, 2^k + 1 up to `maxPower`. */
function lengths(maxPower: number): number[] {
  const out = Array.from({ length: 301 }, (_, i) => i)
  for (let k = 9; k <= maxPower; k++) out.push(2 ** k - 1, 2 ** k, 2 ** k + 1)
  return out
}

describe('Padmé buckets', () => {
  test('paddedLength is the rule of the protocol document, 0…300 and around every power of two to 2^32', () => {
    for (const length of lengths(32)) expect({ length, padded: paddedLength(length, 256) }).toEqual({ length, padded: padmeFromDocs(length) })
  })

  test('as the document promises: never shorter, under 6.25 % longer above 256, 16 sizes per doubling', () => {
    for (const length of lengths(32)) {
      const padded = padmeFromDocs(length)
      expect(padded).toBeGreaterThanOrEqual(length)
      if (length > 256) expect((padded - length) / length).toBeLessThan(0.0625)
    }
    // 257…65,536 (eight doublings, S = 4) take 8 × 2^4 sizes: a ciphertext tells only which one
    const sizes = new Set(Array.from({ length: 65536 - 256 }, (_, i) => paddedLength(257 + i, 256)))
    expect(sizes.size).toBe(128)
  })
})

describe('what the project seals, read independently', () => {
  // a text/plain body of m bytes uses 79 + 10 + m + 64 bytes: 0…300 and every power of two to 1 MiB, ±1
  const bodyLengths = [...Array.from({ length: 301 }, (_, m) => m), ...lengths(20).filter((l) => l >= 512).map((used) => used - v3UsedBytes(10, 0))]

  test('the inner plaintext has the padded length of the document, ends in zeros and carries the signed fields', async () => {
    const now = new Date('2026-01-02T03:04:05.678Z')
    for (const m of bodyLengths) {
      const body = 'x'.repeat(m)
      const sealed = e2e.sealMessage({ version: 3, sender: alice, recipientKey: bob.publicKey, contentType: 'text/plain', body, now })
      const inner = await openBase(bob, sealed.body, V3_MESSAGE_INFO)
      const expected = padmeFromDocs(v3UsedBytes(10, m))
      expect({ m, length: inner.length, ct: unb64u(sealed.body.ct).length }).toEqual({ m, length: expected, ct: expected + 16 })
      const read = readV3Inner(inner)
      expect(inner.subarray(read.paddingAt).every((b) => b === 0)).toBe(true)
      expect({ m, contentType: read.contentType, body: Buffer.from(read.body).toString(), createdMs: read.createdMs }).toEqual({ m, contentType: 'text/plain', body, createdMs: now.getTime() })
      expect(Buffer.from(read.senderKey).toString('base64url')).toBe(alice.publicKey)
      expect(read.verifies(bob.publicKey)).toBe(true)
    }
  }, 60_000)
})
