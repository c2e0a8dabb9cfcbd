/** RFC 8032 §5.1.7: S must be below the group order L; checked on the bytes without big integers. */
import { expect, test } from 'bun:test'
import { hasCanonicalScalar } from '../../src/auth/keys.ts'

const L = (1n << 252n) + 27742317777372353535851937790883648493n

/** A 64-byte signature whose S half encodes `s` (little-endian); R is arbitrary. */
function withScalar(s: bigint): Uint8Array {
  const sig = new Uint8Array(64).fill(0x5a, 0, 32)
  for (let i = 0; i < 32; i++) sig[32 + i] = Number((s >> BigInt(8 * i)) & 0xffn)
  return sig
}

test('the boundary: L − 1 is canonical, L and above are not', () => {
  expect(hasCanonicalScalar(withScalar(0n))).toBe(true)
  expect(hasCanonicalScalar(withScalar(1n))).toBe(true)
  expect(hasCanonicalScalar(withScalar(L - 1n))).toBe(true)
  expect(hasCanonicalScalar(withScalar(L))).toBe(false)
  expect(hasCanonicalScalar(withScalar(L + 1n))).toBe(false)
  expect(hasCanonicalScalar(withScalar((1n << 256n) - 1n))).toBe(false)
  expect(hasCanonicalScalar(withScalar(1n << 252n))).toBe(true) // below L: L's low part is not zero
})

test('agrees with the big-integer comparison on random and near-L scalars', () => {
  const near = [-(1n << 200n), -(1n << 128n), -(1n << 8n), -2n, -1n, 0n, 1n, 2n, 1n << 8n, 1n << 128n]
  const cases: bigint[] = near.map((d) => L + d)
  for (let n = 0; n < 2000; n++) {
    const bytes = crypto.getRandomValues(new Uint8Array(32))
    // half of them with the top byte near L's (0x10) so the comparison reaches the lower bytes
    if (n % 2) bytes[31] = 0x0f + (n % 3)
    cases.push(bytes.reduceRight((acc, b) => (acc << 8n) | BigInt(b), 0n))
  }
  for (const s of cases) expect(hasCanonicalScalar(withScalar(s))).toBe(s < L)
})
