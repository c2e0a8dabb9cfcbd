// v3 padding (docs/protocol.md §14.4): the padded length of the inner plaintext against the Padmé rule
// as the document writes it, computed here with integers; what the project seals, opened and read by the
// independent implementation (@hpke/core, node:crypto); and inner plaintexts built independently —
// signed and sealed correctly — that the project must refuse because their padding or a length is wrong.
import { describe, expect, test } from 'bun:test'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { bindEncryption, DecryptError, ENCRYPTED_CONTENT_TYPE } from '../../src/crypto/index.ts'
import { nativePrimitives } from '../../src/crypto/native.ts'
import { paddedLength } from '../../src/crypto/padding.ts'
import { openBase, sealBase, unb64u } from '../support/independent-hpke.ts'
import { readV3Inner, V3_MESSAGE_INFO, v3Inner, v3UsedBytes, type V3Content } from '../support/independent-v3.ts'

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

/** How the project answers `inner` sealed to bob (Base mode) in a message from alice: 'opened', or the refusal. */
async function refusal(inner: Uint8Array): Promise<{ reason: string; message: string } | 'opened'> {
  const sealed = await sealBase(bob.publicKey, inner, V3_MESSAGE_INFO)
  try {
    e2e.openMessage(bob, { sender_key: alice.publicKey, recipient_key: bob.publicKey, content_type: ENCRYPTED_CONTENT_TYPE, body: { v: 3, ...sealed } })
    return 'opened'
  } catch (err) {
    if (!(err instanceof DecryptError)) throw err
    return { reason: err.reason, message: err.message }
  }
}

describe('inner plaintexts built and sealed independently', () => {
  const content: V3Content = { recipientKey: bob.publicKey, contentType: 'text/plain', body: new TextEncoder().encode('hello, padded'), createdMs: Date.UTC(2026, 0, 2) }
  const used = v3UsedBytes(10, content.body.length)
  const good = () => v3Inner(alice, content, padmeFromDocs(used))
  const setUint = (inner: Uint8Array, at: number, bytes: 2 | 4, value: number) => {
    Buffer.from(inner.buffer, inner.byteOffset, inner.length).writeUIntBE(value, at, bytes)
    return inner
  }

  test('well-formed: opens, sender verified, with the time it signed', async () => {
    const sealed = await sealBase(bob.publicKey, good(), V3_MESSAGE_INFO)
    const opened = e2e.openMessage(bob, { sender_key: alice.publicKey, recipient_key: bob.publicKey, content_type: ENCRYPTED_CONTENT_TYPE, body: { v: 3, ...sealed } })
    expect(opened).toEqual({ content_type: 'text/plain', body: 'hello, padded', encryption: { version: 3, sender_verified: true, sealed_at: '2026-01-02T00:00:00.000Z' } })
  })

  test('a non-zero byte anywhere in the padding is refused as such', async () => {
    for (const at of [used, used + 1, Math.floor((used + padmeFromDocs(used)) / 2), padmeFromDocs(used) - 1]) {
      const inner = good()
      inner[at] = 0x01
      expect(await refusal(inner)).toEqual({ reason: 'malformed', message: expect.stringContaining('padding') })
    }
  })

  test('a body or content-type length that runs past the end is refused as such', async () => {
    const n = 10
    for (const m of [padmeFromDocs(used), padmeFromDocs(used) - 79 - n - 63, 0xffffffff]) {
      expect(await refusal(setUint(good(), 75 + n, 4, m))).toEqual({ reason: 'malformed', message: expect.stringContaining('body length') })
    }
    for (const badN of [padmeFromDocs(used), 0xffff]) {
      expect(await refusal(setUint(good(), 73, 2, badN))).toEqual({ reason: 'malformed', message: expect.stringContaining('content type length') })
    }
  })

  test('a body length one off inside the plaintext: the signature moves, and the message is refused', async () => {
    const m = content.body.length
    expect(await refusal(setUint(good(), 75 + 10, 4, m + 1))).toMatchObject({ reason: 'bad_signature' })
    // one short: the signature's last byte lands in the padding (refused there), or is zero (then it does not verify)
    expect(['malformed', 'bad_signature']).toContain(((await refusal(setUint(good(), 75 + 10, 4, m - 1))) as { reason: string }).reason)
  })

  test('too short for the fixed fields, or another layout byte, is refused', async () => {
    expect(await refusal(good().slice(0, 60))).toEqual({ reason: 'malformed', message: expect.stringContaining('shorter than its fixed fields') })
    const other = good()
    other[0] = 0x04
    expect(await refusal(other)).toEqual({ reason: 'malformed', message: expect.stringContaining('layout byte is 4') })
  })
})
