/**
 * The primitives on node:crypto, for Bun and Node: X25519, Ed25519, SHA-2, HMAC and AES-256-GCM run in
 * native code. ChaCha20-Poly1305 is native where the runtime has it (Node); Bun's node:crypto does not
 * offer it, so there it comes from @noble/ciphers — it only ever seals HPKE payloads (message bodies and
 * 32-byte keys), never attachment bytes.
 */
import * as nodeCrypto from 'node:crypto'
import { chacha20poly1305 } from '@noble/ciphers/chacha.js'
import { bytesKey, isAllZero } from './bytes.ts'
import type { CryptoPrimitives } from './primitives.ts'

// DER prefixes that turn a raw 32-byte key into PKCS#8 / SPKI (RFC 8410), the forms node:crypto imports.
const X25519_PKCS8 = hexBytes('302e020100300506032b656e04220420')
const X25519_SPKI = hexBytes('302a300506032b656e032100')
const ED25519_PKCS8 = hexBytes('302e020100300506032b657004220420')
const ED25519_SPKI = hexBytes('302a300506032b6570032100')

function hexBytes(hex: string): Uint8Array {
  return Uint8Array.from(hex.match(/../g)!.map((h) => parseInt(h, 16)))
}

function der(prefix: Uint8Array, key: Uint8Array): Buffer {
  const out = Buffer.alloc(prefix.length + key.length)
  out.set(prefix, 0)
  out.set(key, prefix.length)
  return out
}

// A view on a Buffer's memory: for large results. Reading `.buffer` of a small Buffer makes the engine
// give it a backing store of its own, which costs more than copying its bytes: small results are copied.
const view = (b: Buffer): Uint8Array => new Uint8Array(b.buffer, b.byteOffset, b.byteLength)
const copy = (b: Uint8Array): Uint8Array => new Uint8Array(b)

/**
 * Importing a raw key into node:crypto costs as much as a scalar multiplication, and the same static
 * keys (an agent's own, its peers') come back on every message: imported keys are kept, by value in
 * small bounded maps, and generated ephemeral secrets by identity until they are dropped.
 */
class KeyCache {
  private readonly map = new Map<string, nodeCrypto.KeyObject>()
  constructor(private readonly limit: number) {}
  get(raw: Uint8Array, make: () => nodeCrypto.KeyObject): nodeCrypto.KeyObject {
    const id = bytesKey(raw)
    let key = this.map.get(id)
    if (!key) {
      key = make()
      if (this.map.size >= this.limit) this.map.delete(this.map.keys().next().value!)
      this.map.set(id, key)
    }
    return key
  }
}

const generated = new WeakMap<Uint8Array, nodeCrypto.KeyObject>()
const x25519Secrets = new KeyCache(64)
const x25519Publics = new KeyCache(1024)
const x25519PublicOf = new KeyCache(64)
const edSecrets = new KeyCache(64)
const edPublics = new KeyCache(1024)

const x25519Private = (sk: Uint8Array) =>
  generated.get(sk) ?? x25519Secrets.get(sk, () => nodeCrypto.createPrivateKey({ key: der(X25519_PKCS8, sk), format: 'der', type: 'pkcs8' }))
const x25519Public = (pk: Uint8Array) => x25519Publics.get(pk, () => nodeCrypto.createPublicKey({ key: der(X25519_SPKI, pk), format: 'der', type: 'spki' }))
const fromJwk = (text: string | undefined) => copy(Buffer.from(text ?? '', 'base64url'))

/**
 * In Bun, node:crypto's createHash/createHmac build a stream object per call, which costs more than
 * hashing a message: Bun.CryptoHasher (the same native code, with an HMAC key) does not.
 */
interface BunHasher {
  update(data: Uint8Array): unknown
  digest(): Uint8Array
}
const bunHasher = (globalThis as { Bun?: { CryptoHasher?: new (algorithm: string, hmacKey?: Uint8Array) => BunHasher } }).Bun?.CryptoHasher
function bunDigest(h: BunHasher, data: Uint8Array): Uint8Array {
  h.update(data)
  return copy(h.digest())
}

const getRandomValues = globalThis.crypto?.getRandomValues?.bind(globalThis.crypto)
function randomBytes(length: number): Uint8Array {
  if (!getRandomValues) return view(nodeCrypto.randomBytes(length))
  const out = new Uint8Array(length)
  // one call fills at most 65,536 bytes
  for (let at = 0; at < length; at += 65536) getRandomValues(out.subarray(at, Math.min(length, at + 65536)))
  return out
}

const hasNativeChacha = nodeCrypto.getCiphers().includes('chacha20-poly1305')

function aeadCipher(algorithm: 'aes-256-gcm' | 'chacha20-poly1305', key: Uint8Array, nonce: Uint8Array, plaintext: Uint8Array, aad: Uint8Array) {
  const cipher = nodeCrypto.createCipheriv(algorithm as 'aes-256-gcm', key, nonce, { authTagLength: 16 })
  // no associated data is the same as empty associated data for both AEADs: the call is skipped (it costs
  // about a sixth of sealing a 64 KiB attachment segment)
  if (aad.length > 0) cipher.setAAD(aad, { plaintextLength: plaintext.length })
  return cipher
}

function aeadSeal(algorithm: 'aes-256-gcm' | 'chacha20-poly1305', key: Uint8Array, nonce: Uint8Array, plaintext: Uint8Array, aad: Uint8Array, output?: Uint8Array): Uint8Array {
  const cipher = aeadCipher(algorithm, key, nonce, plaintext, aad)
  if (output && output.length !== plaintext.length + 16) throw new Error('the output is the plaintext plus 16 bytes')
  const out = output ?? new Uint8Array(plaintext.length + 16)
  const body = cipher.update(plaintext)
  out.set(body, 0)
  const rest = cipher.final()
  out.set(rest, body.length)
  out.set(cipher.getAuthTag(), body.length + rest.length)
  return out
}

/** AES-256-GCM as the cipher gives it out: the ciphertext and the tag, neither copied. */
function gcmSealDetached(key: Uint8Array, nonce: Uint8Array, plaintext: Uint8Array, aad: Uint8Array): [Uint8Array, Uint8Array] {
  const cipher = aeadCipher('aes-256-gcm', key, nonce, plaintext, aad)
  const body = cipher.update(plaintext)
  const rest = cipher.final()
  return [rest.length === 0 ? body : Buffer.concat([body, rest]), cipher.getAuthTag()]
}

function aeadOpen(algorithm: 'aes-256-gcm' | 'chacha20-poly1305', key: Uint8Array, nonce: Uint8Array, ciphertext: Uint8Array, aad: Uint8Array): Uint8Array | null {
  if (ciphertext.length < 16) return null
  const end = ciphertext.length - 16
  try {
    const decipher = nodeCrypto.createDecipheriv(algorithm as 'aes-256-gcm', key, nonce, { authTagLength: 16 })
    decipher.setAAD(aad, { plaintextLength: end })
    decipher.setAuthTag(ciphertext.subarray(end))
    const body = decipher.update(ciphertext.subarray(0, end))
    const rest = decipher.final()
    if (rest.length === 0) return view(body)
    const out = new Uint8Array(body.length + rest.length)
    out.set(body, 0)
    out.set(rest, body.length)
    return out
  } catch {
    return null
  }
}

export const nativePrimitives: CryptoPrimitives = {
  name: 'native',
  randomBytes,
  sha256: (data) => (bunHasher ? bunDigest(new bunHasher('sha256'), data) : copy(nodeCrypto.createHash('sha256').update(data).digest())),
  sha512: (data) => (bunHasher ? bunDigest(new bunHasher('sha512'), data) : copy(nodeCrypto.createHash('sha512').update(data).digest())),
  hmacSha256: (key, data) => (bunHasher ? bunDigest(new bunHasher('sha256', key), data) : copy(nodeCrypto.createHmac('sha256', key).update(data).digest())),
  x25519Generate() {
    const pair = nodeCrypto.generateKeyPairSync('x25519')
    const jwk = pair.privateKey.export({ format: 'jwk' })
    const secretKey = fromJwk(jwk.d)
    generated.set(secretKey, pair.privateKey)
    return { secretKey, publicKey: fromJwk(jwk.x) }
  },
  x25519PublicKey(secretKey) {
    const handle = x25519PublicOf.get(secretKey, () => nodeCrypto.createPublicKey(x25519Private(secretKey)))
    return fromJwk(handle.export({ format: 'jwk' }).x)
  },
  x25519(secretKey, publicKey) {
    let shared: Uint8Array
    try {
      shared = copy(nodeCrypto.diffieHellman({ privateKey: x25519Private(secretKey), publicKey: x25519Public(publicKey) }))
    } catch {
      throw new Error('X25519 failed (invalid or small-order public key)')
    }
    if (isAllZero(shared)) throw new Error('X25519 produced the all-zero value')
    return shared
  },
  chacha20poly1305Seal: (key, nonce, plaintext, aad) =>
    hasNativeChacha ? aeadSeal('chacha20-poly1305', key, nonce, plaintext, aad) : chacha20poly1305(key, nonce, aad).encrypt(plaintext),
  chacha20poly1305Open(key, nonce, ciphertext, aad) {
    if (hasNativeChacha) return aeadOpen('chacha20-poly1305', key, nonce, ciphertext, aad)
    try {
      return chacha20poly1305(key, nonce, aad).decrypt(ciphertext)
    } catch {
      return null
    }
  },
  aes256gcmSeal: (key, nonce, plaintext, aad, output) => aeadSeal('aes-256-gcm', key, nonce, plaintext, aad, output),
  aes256gcmOpen: (key, nonce, ciphertext, aad) => aeadOpen('aes-256-gcm', key, nonce, ciphertext, aad),
  aes256gcmSealDetached: gcmSealDetached,
  ed25519Sign(seed, message) {
    const key = edSecrets.get(seed, () => nodeCrypto.createPrivateKey({ key: der(ED25519_PKCS8, seed), format: 'der', type: 'pkcs8' }))
    return copy(nodeCrypto.sign(null, message, key))
  },
  ed25519Verify(publicKey, message, signature) {
    if (publicKey.length !== 32 || signature.length !== 64) return false
    try {
      const key = edPublics.get(publicKey, () => nodeCrypto.createPublicKey({ key: der(ED25519_SPKI, publicKey), format: 'der', type: 'spki' }))
      return nodeCrypto.verify(null, message, key, signature)
    } catch {
      return false
    }
  },
}
