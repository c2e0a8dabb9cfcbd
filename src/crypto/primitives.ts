/**
 * The primitives every encryption format is built from, behind one interface with two implementations:
 * `native.ts` (node:crypto, for Bun and Node) and `pure.ts` (@noble, for browsers). The formats take a
 * `CryptoPrimitives` and never import either, so they run unchanged on both.
 */
export interface CryptoPrimitives {
  readonly name: string
  randomBytes(length: number): Uint8Array
  sha256(data: Uint8Array): Uint8Array
  sha512(data: Uint8Array): Uint8Array
  hmacSha256(key: Uint8Array, data: Uint8Array): Uint8Array
  /** A fresh X25519 key pair (HPKE's ephemeral key); implementations may keep a handle to the secret for the DH that follows. */
  x25519Generate(): { secretKey: Uint8Array; publicKey: Uint8Array }
  /** The X25519 public key of a 32-byte secret scalar. */
  x25519PublicKey(secretKey: Uint8Array): Uint8Array
  /** X25519(secretKey, publicKey); throws when the result would be all zeros (a small-order point). */
  x25519(secretKey: Uint8Array, publicKey: Uint8Array): Uint8Array
  /** ChaCha20-Poly1305 (RFC 8439): ciphertext with the 16-byte tag appended. */
  chacha20poly1305Seal(key: Uint8Array, nonce: Uint8Array, plaintext: Uint8Array, aad: Uint8Array): Uint8Array
  /** The plaintext, or null when the tag does not verify. */
  chacha20poly1305Open(key: Uint8Array, nonce: Uint8Array, ciphertext: Uint8Array, aad: Uint8Array): Uint8Array | null
  /**
   * AES-256-GCM with a 12-byte nonce: ciphertext with the 16-byte tag appended (the attachment cipher);
   * written into `output` (plaintext.length + 16 bytes) and returned when given.
   */
  aes256gcmSeal(key: Uint8Array, nonce: Uint8Array, plaintext: Uint8Array, aad: Uint8Array, output?: Uint8Array): Uint8Array
  /**
   * The same seal with the ciphertext and the tag apart, each in memory of the primitive's own that the
   * caller may keep (to hash or send without copying); optional, the formats fall back to `aes256gcmSeal`.
   */
  aes256gcmSealDetached?(key: Uint8Array, nonce: Uint8Array, plaintext: Uint8Array, aad: Uint8Array): [ciphertext: Uint8Array, tag: Uint8Array]
  /** The plaintext in new memory (never a view of `ciphertext`, which the caller may reuse), or null. */
  aes256gcmOpen(key: Uint8Array, nonce: Uint8Array, ciphertext: Uint8Array, aad: Uint8Array): Uint8Array | null
  /** Ed25519 (RFC 8032) signature by a 32-byte seed. */
  ed25519Sign(seed: Uint8Array, message: Uint8Array): Uint8Array
  ed25519Verify(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): boolean
}
