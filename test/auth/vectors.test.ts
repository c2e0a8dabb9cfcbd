import { describe, expect, test } from 'bun:test'
import { createHmac } from 'node:crypto'
import { ed25519 } from '@noble/curves/ed25519.js'
import vectors from '../fixtures/test-vectors.json'
import { bodyHash, canonicalString, wsCanonicalString } from '../../src/auth/canonical.ts'
import { decodePublicKey, decodeSignature } from '../../src/auth/keys.ts'
import { keyPairFromSeed, signRequest, signWsAuth } from '../../src/auth/sign.ts'
import { verifyEd25519 } from '../../src/auth/verify.ts'
import { decodeBase64Url, encodeBase64Url } from '../../src/lib/base64url.ts'

describe('shared/test-vectors.json', () => {
  for (const v of vectors.requests) {
    test(v.name, () => {
      const keys = keyPairFromSeed(Buffer.from(v.private_seed_hex, 'hex'))
      expect(keys.publicKey).toBe(v.public_key)
      expect(bodyHash(v.body)).toBe(v.body_hash)
      expect(canonicalString(v.method, v.path, v.timestamp, v.body_hash)).toBe(v.canonical_string)
      const headers = signRequest(keys, v.method, v.path, v.body, v.timestamp)
      expect(headers['X-M2M-Signature']).toBe(v.signature)
      // the server's native verifier accepts it, and rejects it for another message
      const pub = decodePublicKey(v.public_key)!
      expect(verifyEd25519(pub, v.canonical_string, decodeSignature(v.signature)!)).toBe(true)
      expect(verifyEd25519(pub, v.canonical_string + 'x', decodeSignature(v.signature)!)).toBe(false)
      // an independent implementation agrees
      expect(encodeBase64Url(ed25519.sign(new TextEncoder().encode(v.canonical_string), Buffer.from(v.private_seed_hex, 'hex')))).toBe(v.signature)
    })
  }

  test(vectors.websocket.name, () => {
    const w = vectors.websocket
    const keys = keyPairFromSeed(Buffer.from(w.private_seed_hex, 'hex'))
    expect(wsCanonicalString(w.frame.timestamp)).toBe(w.canonical_string)
    expect(signWsAuth(keys, w.frame.timestamp)).toEqual(w.frame as any)
    expect(verifyEd25519(decodePublicKey(w.public_key)!, w.canonical_string, decodeSignature(w.frame.signature)!)).toBe(true)
  })

  test(vectors.webhook.name, () => {
    const w = vectors.webhook
    const key = decodeBase64Url(w.secret)!
    expect(Buffer.from(key).toString('hex')).toBe(w.hmac_key_hex)
    expect(createHmac('sha256', key).update(w.raw_body).digest('hex')).toBe(w.signature_header)
  })
})

describe('non-canonical signatures', () => {
  test('S + L is rejected like RFC 8032 verifiers do', () => {
    const v = vectors.requests[0]
    const sig = decodeSignature(v.signature)!
    const L = (1n << 252n) + 27742317777372353535851937790883648493n
    let s = 0n
    for (let i = 63; i >= 32; i--) s = (s << 8n) | BigInt(sig[i])
    s += L
    const bad = new Uint8Array(sig)
    for (let i = 32; i < 64; i++) {
      bad[i] = Number(s & 0xffn)
      s >>= 8n
    }
    expect(s).toBe(0n) // still fits in 32 bytes
    expect(verifyEd25519(decodePublicKey(v.public_key)!, v.canonical_string, bad)).toBe(false)
  })

  test('base64url with padding, wrong alphabet or non-canonical bits is malformed', () => {
    expect(decodeBase64Url('AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=')).toBeNull()
    expect(decodeBase64Url('AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+')).toBeNull()
    expect(decodeBase64Url('AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh9')).toBeNull() // trailing bits set
    expect(decodeBase64Url('AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8')?.length).toBe(32)
  })
})

describe('small-order points', () => {
  test('a small-order public key never verifies, whatever the message (forged all-zero signatures)', async () => {
    const { isSmallOrderPoint } = await import('../../src/auth/keys.ts')
    const zeroKey = new Uint8Array(32)
    const zeroSig = new Uint8Array(64)
    // with the identity-like key and R, the plain equation holds for a fraction of messages
    let accepted = 0
    for (let i = 0; i < 256; i++) if (verifyEd25519(zeroKey, `GET\n/v1/x\n2026-11-22T10:00:00.${String(i).padStart(3, '0')}Z\nh`, zeroSig)) accepted++
    expect(accepted).toBe(0)
    expect(isSmallOrderPoint(zeroKey)).toBe(true)
    const one = new Uint8Array(32)
    one[0] = 1
    expect(isSmallOrderPoint(one)).toBe(true)
    const signBit = new Uint8Array(one)
    signBit[31] = 0x80
    expect(isSmallOrderPoint(signBit)).toBe(true)
  })

  test('real keys are not small order', () => {
    for (const v of vectors.requests) {
      const keys = keyPairFromSeed(Buffer.from(v.private_seed_hex, 'hex'))
      expect(verifyEd25519(decodePublicKey(keys.publicKey)!, v.canonical_string, decodeSignature(v.signature)!)).toBe(true)
    }
  })

  test('the all-zero key cannot authenticate over HTTP (steps 1–3 → 401 invalid_signature)', async () => {
    const { startTestRelay, BASE_URL } = await import('../support/harness.ts')
    const t = await startTestRelay()
    try {
      const key = 'A'.repeat(43)
      for (let i = 0; i < 64; i++) {
        const ts = new Date(t.clock.now() + i).toISOString()
        const res = await t.handle(new Request(`${BASE_URL}/v1/agents/${key}`, { headers: { 'X-M2M-Public-Key': key, 'X-M2M-Timestamp': ts, 'X-M2M-Signature': 'A'.repeat(86) } }))
        expect(res.status).toBe(401)
      }
      expect((await t.relay.storage.agents.find(key))).toBeNull()
    } finally {
      await t.close()
    }
  })
})

describe('non-canonical point encodings', () => {
  test('y ≥ p is refused for the key and for R; the largest canonical y is not', async () => {
    const { isCanonicalPointEncoding } = await import('../../src/auth/keys.ts')
    const enc = (first: number, signBit = false) => {
      const b = new Uint8Array(32).fill(0xff)
      b[0] = first
      b[31] = signBit ? 0xff : 0x7f
      return b
    }
    for (let first = 0xed; first <= 0xff; first++) {
      expect(isCanonicalPointEncoding(enc(first))).toBe(false)
      expect(isCanonicalPointEncoding(enc(first, true))).toBe(false)
    }
    expect(isCanonicalPointEncoding(enc(0xec))).toBe(true) // p − 1
    const v = vectors.requests[0]
    const sig = decodeSignature(v.signature)!
    const badR = new Uint8Array(sig)
    badR.set(enc(0xf0), 0)
    expect(verifyEd25519(decodePublicKey(v.public_key)!, v.canonical_string, badR)).toBe(false)
    expect(verifyEd25519(enc(0xf0), v.canonical_string, sig)).toBe(false)
  })
})
