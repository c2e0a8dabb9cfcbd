// Ed25519 → X25519 conversion (libsodium's vectors and refusals) and the two primitive sets agreeing.
import { describe, expect, test } from 'bun:test'
import { ed25519, x25519 } from '@noble/curves/ed25519.js'
import { fromHex, toHex } from '../../src/crypto/bytes.ts'
import { edPublicToX25519, edSeedToX25519 } from '../../src/crypto/ed-to-x.ts'
import { nativePrimitives as native } from '../../src/crypto/native.ts'
import { purePrimitives as pure } from '../../src/crypto/pure.ts'

describe('Ed25519 to X25519', () => {
  // libsodium test/default/ed25519_convert.c with its expected output
  const seed = fromHex('421151a459faeade3d247115f94aedae42318124095afabe4d1451a559faedee')

  test('matches crypto_sign_ed25519_pk_to_curve25519 / sk_to_curve25519', () => {
    const edPub = ed25519.getPublicKey(seed)
    expect(toHex(edPublicToX25519(edPub))).toBe('f1814f0e8ff1043d8a44d25babff3cedcae6c22c3edaa48f857ae70de2baae50')
    expect(toHex(edSeedToX25519(native, seed))).toBe('8052030376d47112be7f73ed7a019293dd12ad910b654455798b4667d73de166')
    expect(toHex(edSeedToX25519(pure, seed))).toBe('8052030376d47112be7f73ed7a019293dd12ad910b654455798b4667d73de166')
  })

  test('agrees with @noble/curves and with X25519 of the converted secret, for random keys', () => {
    for (let i = 0; i < 20; i++) {
      const s = crypto.getRandomValues(new Uint8Array(32))
      const pub = ed25519.getPublicKey(s)
      const u = edPublicToX25519(pub)
      expect(toHex(u)).toBe(toHex(ed25519.utils.toMontgomery(pub)))
      expect(toHex(native.x25519PublicKey(edSeedToX25519(native, s)))).toBe(toHex(u))
      expect(toHex(edSeedToX25519(pure, s))).toBe(toHex(ed25519.utils.toMontgomerySecret(s)))
    }
  })

  test('refuses what libsodium refuses: small-order and off-curve encodings', () => {
    for (const bad of ['00', '01', '02', '05', 'ec']) {
      const key = new Uint8Array(32)
      key[0] = parseInt(bad, 16)
      if (bad === 'ec') key.set(fromHex('ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f'))
      expect(() => edPublicToX25519(key)).toThrow()
    }
    expect(() => edPublicToX25519(new Uint8Array(31))).toThrow()
  })
})

describe('native and pure primitives agree', () => {
  const key = crypto.getRandomValues(new Uint8Array(32))
  const nonce = crypto.getRandomValues(new Uint8Array(12))
  const aad = new TextEncoder().encode('aad')

  test('hashes, HMAC, X25519, Ed25519', () => {
    const data = crypto.getRandomValues(new Uint8Array(1000))
    expect(toHex(native.sha256(data))).toBe(toHex(pure.sha256(data)))
    expect(toHex(native.sha512(data))).toBe(toHex(pure.sha512(data)))
    expect(toHex(native.hmacSha256(key, data))).toBe(toHex(pure.hmacSha256(key, data)))
    const a = native.randomBytes(32)
    const b = pure.randomBytes(32)
    expect(toHex(native.x25519PublicKey(a))).toBe(toHex(pure.x25519PublicKey(a)))
    expect(toHex(native.x25519(a, pure.x25519PublicKey(b)))).toBe(toHex(pure.x25519(b, native.x25519PublicKey(a))))
    expect(toHex(native.x25519(a, x25519.getPublicKey(b)))).toBe(toHex(x25519.getSharedSecret(a, x25519.getPublicKey(b))))
    const pub = ed25519.getPublicKey(key)
    expect(toHex(native.ed25519Sign(key, data))).toBe(toHex(pure.ed25519Sign(key, data)))
    expect(native.ed25519Verify(pub, data, pure.ed25519Sign(key, data))).toBe(true)
    const sig = native.ed25519Sign(key, data)
    sig[5]! ^= 1
    expect(native.ed25519Verify(pub, data, sig)).toBe(false)
    expect(pure.ed25519Verify(pub, data, sig)).toBe(false)
  })

  test('X25519 with a small-order point throws on both', () => {
    const zero = new Uint8Array(32)
    expect(() => native.x25519(key, zero)).toThrow()
    expect(() => pure.x25519(key, zero)).toThrow()
  })

  for (const [name, seal, open] of [
    ['ChaCha20-Poly1305', 'chacha20poly1305Seal', 'chacha20poly1305Open'],
    ['AES-256-GCM', 'aes256gcmSeal', 'aes256gcmOpen'],
  ] as const) {
    test(`${name}: one seals, the other opens; a changed byte or aad is refused`, () => {
      for (const size of [0, 1, 64, 1000]) {
        const pt = crypto.getRandomValues(new Uint8Array(size))
        const ct = native[seal](key, nonce, pt, aad)
        expect(toHex(ct)).toBe(toHex(pure[seal](key, nonce, pt, aad)))
        expect(toHex(pure[open](key, nonce, ct, aad)!)).toBe(toHex(pt))
        expect(toHex(native[open](key, nonce, ct, aad)!)).toBe(toHex(pt))
        const bad = ct.slice()
        bad[bad.length - 1]! ^= 0x80
        expect(native[open](key, nonce, bad, aad)).toBeNull()
        expect(pure[open](key, nonce, bad, aad)).toBeNull()
        expect(native[open](key, nonce, ct, new Uint8Array(0))).toBeNull()
        expect(native[open](key, nonce, ct.subarray(0, 8), aad)).toBeNull()
      }
    })
  }
})
