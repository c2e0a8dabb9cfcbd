/**
 * HPKE (RFC 9180) for exactly one suite: DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, ChaCha20-Poly1305
 * (kem 0x0020, kdf 0x0001, aead 0x0003), in the Base (0) and Auth (2) modes. Written against the RFC's
 * pseudocode (§4 – §5.2, §7.1); tested with its published vectors on both primitive sets.
 */
import { bytesKey, concatBytes, i2osp, utf8 } from './bytes.ts'
import { hkdfExpand, hkdfExtract } from './hkdf.ts'
import type { CryptoPrimitives } from './primitives.ts'

export const MODE_BASE = 0x00
export const MODE_AUTH = 0x02

const KEM_ID = 0x0020
const KDF_ID = 0x0001
const AEAD_ID = 0x0003
const N_SECRET = 32
const N_ENC = 32
const N_K = 32
const N_N = 12
const N_H = 32

const HPKE_V1 = utf8.encode('HPKE-v1')
const KEM_SUITE = concatBytes(utf8.encode('KEM'), i2osp(KEM_ID, 2))
const HPKE_SUITE = concatBytes(utf8.encode('HPKE'), i2osp(KEM_ID, 2), i2osp(KDF_ID, 2), i2osp(AEAD_ID, 2))
const EMPTY = new Uint8Array(0)
const labels = new Map<string, Uint8Array>()
const label = (text: string) => labels.get(text) ?? (labels.set(text, utf8.encode(text)), labels.get(text)!)

function labeledExtract(p: CryptoPrimitives, suite: Uint8Array, salt: Uint8Array, name: string, ikm: Uint8Array) {
  return hkdfExtract(p, salt, concatBytes(HPKE_V1, suite, label(name), ikm))
}

function labeledExpand(p: CryptoPrimitives, suite: Uint8Array, prk: Uint8Array, name: string, info: Uint8Array, length: number) {
  return hkdfExpand(p, prk, concatBytes(i2osp(length, 2), HPKE_V1, suite, label(name), info), length)
}

function extractAndExpand(p: CryptoPrimitives, dh: Uint8Array, kemContext: Uint8Array): Uint8Array {
  const eaePrk = labeledExtract(p, KEM_SUITE, EMPTY, 'eae_prk', dh)
  return labeledExpand(p, KEM_SUITE, eaePrk, 'shared_secret', kemContext, N_SECRET)
}

/** DeriveKeyPair (RFC 9180 §7.1.3) for X25519: the secret key from input keying material. */
export function deriveKeyPair(p: CryptoPrimitives, ikm: Uint8Array): { secretKey: Uint8Array; publicKey: Uint8Array } {
  const dkpPrk = labeledExtract(p, KEM_SUITE, EMPTY, 'dkp_prk', ikm)
  const secretKey = labeledExpand(p, KEM_SUITE, dkpPrk, 'sk', EMPTY, 32)
  return { secretKey, publicKey: p.x25519PublicKey(secretKey) }
}

/** An HPKE context after setup: seals or opens in sequence (nonce = base_nonce XOR seq). */
export class HpkeContext {
  private seq = 0
  private exporter: Uint8Array | null = null
  constructor(
    private readonly p: CryptoPrimitives,
    readonly key: Uint8Array,
    readonly baseNonce: Uint8Array,
    private readonly secret: Uint8Array,
    private readonly context: Uint8Array,
  ) {}

  /** Derived when first asked for: sealing and opening never need it. */
  get exporterSecret(): Uint8Array {
    return (this.exporter ??= labeledExpand(this.p, HPKE_SUITE, this.secret, 'exp', this.context, N_H))
  }

  private nextNonce(): Uint8Array {
    const nonce = this.baseNonce.slice()
    const seq = i2osp(this.seq, N_N)
    for (let i = 0; i < N_N; i++) nonce[i]! ^= seq[i]!
    if (this.seq >= Number.MAX_SAFE_INTEGER) throw new Error('HPKE message limit reached')
    this.seq++
    return nonce
  }

  /** Advances the sequence number without sealing (for test vectors that skip numbers). */
  skip(count: number): void {
    this.seq += count
  }

  seal(aad: Uint8Array, plaintext: Uint8Array): Uint8Array {
    return this.p.chacha20poly1305Seal(this.key, this.nextNonce(), plaintext, aad)
  }

  /** The plaintext, or null when the tag does not verify (the sequence number then does not advance). */
  open(aad: Uint8Array, ciphertext: Uint8Array): Uint8Array | null {
    const seq = this.seq
    const pt = this.p.chacha20poly1305Open(this.key, this.nextNonce(), ciphertext, aad)
    if (!pt) this.seq = seq
    return pt
  }

  export(exporterContext: Uint8Array, length: number): Uint8Array {
    return labeledExpand(this.p, HPKE_SUITE, this.exporterSecret, 'sec', exporterContext, length)
  }
}

// psk_id is always empty and `info` is one of a few constants: their hashes are computed once
const infoHashes = new Map<string, Uint8Array>()

function infoHashOf(p: CryptoPrimitives, info: Uint8Array): Uint8Array {
  const id = bytesKey(info)
  let hash = infoHashes.get(id)
  if (!hash) {
    hash = labeledExtract(p, HPKE_SUITE, EMPTY, 'info_hash', info)
    if (infoHashes.size < 64) infoHashes.set(id, hash)
  }
  return hash
}

let pskIdHashCache: Uint8Array | null = null

/**
 * Auth mode's second DH is between two static keys (the sender's and the recipient's), the same for
 * every message between the same two agents: its result is kept, per set of primitives, in a bounded
 * map (the oldest entry goes first), so an exchange costs one scalar multiplication per side, not two.
 */
const STATIC_DH_LIMIT = 256
const staticDhCache = new WeakMap<CryptoPrimitives, Map<string, Uint8Array>>()

function staticDh(p: CryptoPrimitives, secretKey: Uint8Array, publicKey: Uint8Array): Uint8Array {
  let cache = staticDhCache.get(p)
  if (!cache) staticDhCache.set(p, (cache = new Map()))
  const id = bytesKey(secretKey, publicKey)
  const hit = cache.get(id)
  if (hit) return hit.slice()
  const shared = p.x25519(secretKey, publicKey)
  if (cache.size >= STATIC_DH_LIMIT) cache.delete(cache.keys().next().value!)
  cache.set(id, shared.slice())
  return shared
}

function keySchedule(p: CryptoPrimitives, mode: number, sharedSecret: Uint8Array, info: Uint8Array): HpkeContext {
  const pskIdHash = (pskIdHashCache ??= labeledExtract(p, HPKE_SUITE, EMPTY, 'psk_id_hash', EMPTY))
  const infoHash = infoHashOf(p, info)
  const context = concatBytes(Uint8Array.of(mode), pskIdHash, infoHash)
  const secret = labeledExtract(p, HPKE_SUITE, sharedSecret, 'secret', EMPTY)
  return new HpkeContext(
    p,
    labeledExpand(p, HPKE_SUITE, secret, 'key', context, N_K),
    labeledExpand(p, HPKE_SUITE, secret, 'base_nonce', context, N_N),
    secret,
    context,
  )
}

export interface SenderSetup {
  /** The encapsulated key: the ephemeral X25519 public key, 32 bytes. */
  enc: Uint8Array
  context: HpkeContext
}

export interface SetupSenderOptions {
  /** Mode Auth when given: the sender's static X25519 secret key. */
  senderSecretKey?: Uint8Array
  /** Its public key, when the caller has it at hand (saves a scalar multiplication). */
  senderPublicKey?: Uint8Array
  /** The ephemeral secret key; only for reproducing published test vectors — never set it otherwise. */
  ephemeralSecretKey?: Uint8Array
}

/** SetupBaseS / SetupAuthS (RFC 9180 §5.1.1, §5.1.3). */
export function setupSender(p: CryptoPrimitives, recipientPublicKey: Uint8Array, info: Uint8Array, opts: SetupSenderOptions = {}): SenderSetup {
  const ephemeral = opts.ephemeralSecretKey ? { secretKey: opts.ephemeralSecretKey, publicKey: p.x25519PublicKey(opts.ephemeralSecretKey) } : p.x25519Generate()
  const skE = ephemeral.secretKey
  const enc = ephemeral.publicKey
  const dhR = p.x25519(skE, recipientPublicKey)
  if (!opts.senderSecretKey) {
    const shared = extractAndExpand(p, dhR, concatBytes(enc, recipientPublicKey))
    return { enc, context: keySchedule(p, MODE_BASE, shared, info) }
  }
  const dhS = staticDh(p, opts.senderSecretKey, recipientPublicKey)
  const pkS = opts.senderPublicKey ?? p.x25519PublicKey(opts.senderSecretKey)
  const shared = extractAndExpand(p, concatBytes(dhR, dhS), concatBytes(enc, recipientPublicKey, pkS))
  return { enc, context: keySchedule(p, MODE_AUTH, shared, info) }
}

export interface SetupRecipientOptions {
  /** Mode Auth when given: the sender's static X25519 public key. */
  senderPublicKey?: Uint8Array
  /** The recipient's public key, when the caller has it at hand (saves one scalar multiplication). */
  recipientPublicKey?: Uint8Array
}

/** SetupBaseR / SetupAuthR (RFC 9180 §5.1.1, §5.1.3). Throws when `enc` is not a usable X25519 key. */
export function setupRecipient(p: CryptoPrimitives, enc: Uint8Array, recipientSecretKey: Uint8Array, info: Uint8Array, opts: SetupRecipientOptions = {}): HpkeContext {
  if (enc.length !== N_ENC) throw new Error('the encapsulated key is 32 bytes')
  const pkR = opts.recipientPublicKey ?? p.x25519PublicKey(recipientSecretKey)
  const dhE = p.x25519(recipientSecretKey, enc)
  if (!opts.senderPublicKey) {
    return keySchedule(p, MODE_BASE, extractAndExpand(p, dhE, concatBytes(enc, pkR)), info)
  }
  const dhS = staticDh(p, recipientSecretKey, opts.senderPublicKey)
  const shared = extractAndExpand(p, concatBytes(dhE, dhS), concatBytes(enc, pkR, opts.senderPublicKey))
  return keySchedule(p, MODE_AUTH, shared, info)
}

/** Single-shot seal (RFC 9180 §6.1): Base mode, or Auth mode with `senderSecretKey`. */
export function seal(p: CryptoPrimitives, recipientPublicKey: Uint8Array, info: Uint8Array, aad: Uint8Array, plaintext: Uint8Array, opts: SetupSenderOptions = {}) {
  const { enc, context } = setupSender(p, recipientPublicKey, info, opts)
  return { enc, ct: context.seal(aad, plaintext) }
}

/** Single-shot open: the plaintext, or null when it does not authenticate. */
export function open(p: CryptoPrimitives, enc: Uint8Array, recipientSecretKey: Uint8Array, info: Uint8Array, aad: Uint8Array, ct: Uint8Array, opts: SetupRecipientOptions = {}): Uint8Array | null {
  return setupRecipient(p, enc, recipientSecretKey, info, opts).open(aad, ct)
}
