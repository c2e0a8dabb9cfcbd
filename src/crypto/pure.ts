/**
 * The primitives in pure TypeScript (@noble/curves, @noble/ciphers, @noble/hashes): for browsers, and
 * as the independent second implementation the tests compare the native one against.
 */
import { ed25519, x25519 } from '@noble/curves/ed25519.js'
import { chacha20poly1305 } from '@noble/ciphers/chacha.js'
import { gcm } from '@noble/ciphers/aes.js'
import { sha256, sha512 } from '@noble/hashes/sha2.js'
import { hmac } from '@noble/hashes/hmac.js'
import { isAllZero } from './bytes.ts'
import type { CryptoPrimitives } from './primitives.ts'

function openOrNull(open: () => Uint8Array): Uint8Array | null {
  try {
    return open()
  } catch {
    return null
  }
}

export const purePrimitives: CryptoPrimitives = {
  name: 'pure',
  randomBytes: (length) => crypto.getRandomValues(new Uint8Array(length)),
  sha256: (data) => sha256(data),
  sha512: (data) => sha512(data),
  hmacSha256: (key, data) => hmac(sha256, key, data),
  x25519Generate() {
    const secretKey = x25519.utils.randomSecretKey()
    return { secretKey, publicKey: x25519.getPublicKey(secretKey) }
  },
  x25519PublicKey: (secretKey) => x25519.getPublicKey(secretKey),
  x25519(secretKey, publicKey) {
    const shared = x25519.getSharedSecret(secretKey, publicKey)
    if (isAllZero(shared)) throw new Error('X25519 produced the all-zero value')
    return shared
  },
  chacha20poly1305Seal: (key, nonce, plaintext, aad) => chacha20poly1305(key, nonce, aad).encrypt(plaintext),
  chacha20poly1305Open: (key, nonce, ciphertext, aad) => openOrNull(() => chacha20poly1305(key, nonce, aad).decrypt(ciphertext)),
  aes256gcmSeal(key, nonce, plaintext, aad, output) {
    const sealed = gcm(key, nonce, aad).encrypt(plaintext)
    if (!output) return sealed
    if (output.length !== sealed.length) throw new Error('the output is the plaintext plus 16 bytes')
    output.set(sealed)
    return output
  },
  aes256gcmOpen: (key, nonce, ciphertext, aad) => openOrNull(() => gcm(key, nonce, aad).decrypt(ciphertext)),
  ed25519Sign: (seed, message) => ed25519.sign(message, seed),
  ed25519Verify(publicKey, message, signature) {
    try {
      return ed25519.verify(signature, message, publicKey)
    } catch {
      return false
    }
  },
}
