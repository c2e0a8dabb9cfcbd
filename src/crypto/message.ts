/**
 * Sealing and opening message bodies (docs/protocol.md §14):
 * - v2, MRP's format: HPKE Auth mode from the sender's to the recipient's converted keys;
 *   body `{v: 2, enc, ct, ct_content_type}`.
 * - v3: HPKE Base mode to the recipient; the plaintext carries the sender's key, the plaintext content
 *   type, the sender's clock, a digest of the attachments' wrapped keys and an Ed25519 signature over
 *   them, padded with Padmé; body `{v: 3, enc, ct}`.
 * Byte strings are unpadded base64url.
 */
import { ENCRYPTED_CONTENT_TYPE, V2_MESSAGE_AAD, V2_MESSAGE_INFO, V3_INNER_FORMAT, V3_MESSAGE_AAD, V3_MESSAGE_INFO, V3_MIN_PADDED_BYTES, V3_SIGNATURE_CONTEXT, type EncryptionVersion } from './constants.ts'
import { concatBytes, equalBytes, fromBase64Url, fromUtf8, i2osp, isAllZero, readUint, toBase64Url, utf8 } from './bytes.ts'
import { decodeBody, encodeBody } from './body-codec.ts'
import { edPublicToX25519, edSeedToX25519 } from './ed-to-x.ts'
import { DecryptError } from './errors.ts'
import { open, seal } from './hpke.ts'
import { paddedLength } from './padding.ts'
import type { CryptoPrimitives } from './primitives.ts'

/** An agent's own keys: the Ed25519 seed and the base64url public key (the shape of the client's KeyPair). */
export interface AgentKeys {
  seed: Uint8Array
  publicKey: string
}

/** What a wrapped attachment key looks like on the wire (the fields of an attachment). */
export interface WrappedKeyFields {
  dek_enc: string
  dek_ct: string
}

export interface SealMessageInput {
  version: EncryptionVersion
  sender: AgentKeys
  recipientKey: string
  /** The plaintext's content type; default application/json. */
  contentType?: string
  body: unknown
  /** v3: the encrypted attachments the message will carry, in order; their wrapped keys are signed. */
  attachments?: WrappedKeyFields[]
  /** v3: the time the sender signs; default now. */
  now?: Date
}

export interface EncryptedBody {
  v: EncryptionVersion
  enc: string
  ct: string
  ct_content_type?: string
}

export interface SealedMessage {
  content_type: typeof ENCRYPTED_CONTENT_TYPE
  body: EncryptedBody
}

/** What the recipient learns besides the body. */
export interface EncryptionFacts {
  version: EncryptionVersion
  /** True when the ciphertext proves that the message's `sender_key` wrote it. */
  sender_verified: boolean
  /** v3: the key that signed, when it is not the message's `sender_key` (then sender_verified is false). */
  signer_key?: string
  /** v3: the sender's clock at sealing, as it signed it. */
  sealed_at?: string
}

export interface OpenedMessage {
  content_type: string
  body: unknown
  encryption: EncryptionFacts
}

/** The fields of a received message that opening reads. */
export interface EncryptedMessageFields {
  sender_key: string
  recipient_key: string
  content_type: string
  body?: unknown
  attachments?: readonly { encrypted?: boolean; dek_enc?: string; dek_ct?: string }[]
}

export function isEncryptedMessage(message: { content_type?: string }): boolean {
  return message.content_type === ENCRYPTED_CONTENT_TYPE
}

function decodeKey(text: string, whose: string): Uint8Array {
  const bytes = fromBase64Url(text)
  if (!bytes || bytes.length !== 32) throw new DecryptError('bad_key', `${whose} key is not 32 bytes of base64url`)
  return bytes
}

function xPublic(edKey: string, whose: string): Uint8Array {
  try {
    return edPublicToX25519(decodeKey(edKey, whose))
  } catch (err) {
    if (err instanceof DecryptError) throw err
    throw new DecryptError('bad_key', `${whose} key cannot be used for encryption: ${(err as Error).message}`)
  }
}

/** SHA-256 over the raw bytes of every wrapped attachment key, in order (SHA-256 of nothing when none). */
export function attachmentsDigest(p: CryptoPrimitives, attachments: readonly { encrypted?: boolean; dek_enc?: string; dek_ct?: string }[] = []): Uint8Array {
  const parts: Uint8Array[] = []
  for (const a of attachments) {
    if (!a.encrypted && !(a.dek_enc || a.dek_ct)) continue
    const enc = fromBase64Url(a.dek_enc ?? '')
    const ct = fromBase64Url(a.dek_ct ?? '')
    if (!enc || !ct) throw new DecryptError('malformed', 'an encrypted attachment has no valid dek_enc/dek_ct')
    parts.push(enc, ct)
  }
  return p.sha256(concatBytes(...parts))
}

function signedBytes(p: CryptoPrimitives, senderPk: Uint8Array, recipientPk: Uint8Array, contentType: Uint8Array, body: Uint8Array, createdMs: number, digest: Uint8Array) {
  return concatBytes(V3_SIGNATURE_CONTEXT, senderPk, recipientPk, i2osp(contentType.length, 2), contentType, p.sha256(body), i2osp(createdMs, 8), digest)
}

/** Encrypts a body for one recipient; the result replaces `content_type` and `body` of the message sent. */
export function sealMessage(p: CryptoPrimitives, input: SealMessageInput): SealedMessage {
  const contentType = input.contentType ?? 'application/json'
  const plaintext = encodeBody(contentType, input.body)
  const pkR = xPublic(input.recipientKey, "the recipient's")
  if (input.version === 2) {
    const skS = edSeedToX25519(p, input.sender.seed)
    const pkS = xPublic(input.sender.publicKey, "the sender's")
    const { enc, ct } = seal(p, pkR, V2_MESSAGE_INFO, V2_MESSAGE_AAD, plaintext, { senderSecretKey: skS, senderPublicKey: pkS })
    return { content_type: ENCRYPTED_CONTENT_TYPE, body: { v: 2, enc: toBase64Url(enc), ct: toBase64Url(ct), ct_content_type: contentType } }
  }
  if (input.version !== 3) throw new Error(`unknown encryption version ${input.version}`)
  const senderPk = decodeKey(input.sender.publicKey, "the sender's")
  const recipientPk = decodeKey(input.recipientKey, "the recipient's")
  const ctype = utf8.encode(contentType)
  if (ctype.length > 0xffff) throw new Error('content type too long')
  const createdMs = (input.now ?? new Date()).getTime()
  const digest = attachmentsDigest(p, input.attachments?.map((a) => ({ encrypted: true, ...a })))
  const signature = p.ed25519Sign(input.sender.seed, signedBytes(p, senderPk, recipientPk, ctype, plaintext, createdMs, digest))
  const head = concatBytes(Uint8Array.of(V3_INNER_FORMAT), senderPk, i2osp(createdMs, 8), digest, i2osp(ctype.length, 2), ctype, i2osp(plaintext.length, 4))
  const used = head.length + plaintext.length + signature.length
  const inner = new Uint8Array(paddedLength(used, V3_MIN_PADDED_BYTES))
  inner.set(head, 0)
  inner.set(plaintext, head.length)
  inner.set(signature, head.length + plaintext.length)
  const { enc, ct } = seal(p, pkR, V3_MESSAGE_INFO, V3_MESSAGE_AAD, inner)
  return { content_type: ENCRYPTED_CONTENT_TYPE, body: { v: 3, enc: toBase64Url(enc), ct: toBase64Url(ct) } }
}

/** The shape check the relay and clients share: an encrypted body of a known version, fields present. */
export function parseEncryptedBody(body: unknown): { v: number; enc: Uint8Array; ct: Uint8Array; ct_content_type?: string } {
  if (!body || typeof body !== 'object' || Array.isArray(body)) throw new DecryptError('malformed', 'the encrypted body is not an object')
  const b = body as Record<string, unknown>
  if (typeof b.v !== 'number') throw new DecryptError('malformed', 'the encrypted body has no version (v)')
  if (b.v !== 2 && b.v !== 3) throw new DecryptError('unsupported_version', `encryption version ${b.v} is not supported (2 and 3 are)`)
  const enc = typeof b.enc === 'string' ? fromBase64Url(b.enc) : null
  const ct = typeof b.ct === 'string' ? fromBase64Url(b.ct) : null
  if (!enc || enc.length !== 32) throw new DecryptError('malformed', 'enc is not 32 bytes of base64url')
  if (!ct || ct.length < 16) throw new DecryptError('malformed', 'ct is not base64url of at least 16 bytes')
  if (b.v === 2 && typeof b.ct_content_type !== 'string') throw new DecryptError('malformed', 'a v2 body needs ct_content_type')
  return { v: b.v, enc, ct, ct_content_type: b.ct_content_type as string | undefined }
}

/**
 * Decrypts a received message addressed to `recipient`. Throws DecryptError with a reason — never
 * returns bytes that did not authenticate.
 */
export function openMessage(p: CryptoPrimitives, recipient: AgentKeys, message: EncryptedMessageFields): OpenedMessage {
  const parsed = parseEncryptedBody(message.body)
  if (message.recipient_key !== recipient.publicKey) throw new DecryptError('bad_key', 'the message is addressed to another key')
  const skR = edSeedToX25519(p, recipient.seed)
  // the converted Ed25519 public key is the X25519 public key of skR (and is cached)
  const pkR = xPublic(recipient.publicKey, 'our')
  if (parsed.v === 2) {
    const pkS = xPublic(message.sender_key, "the sender's")
    const pt = tryOpen(() => open(p, parsed.enc, skR, V2_MESSAGE_INFO, V2_MESSAGE_AAD, parsed.ct, { senderPublicKey: pkS, recipientPublicKey: pkR }))
    const contentType = parsed.ct_content_type!
    return { content_type: contentType, body: decodeBody(contentType, pt), encryption: { version: 2, sender_verified: true } }
  }
  const inner = tryOpen(() => open(p, parsed.enc, skR, V3_MESSAGE_INFO, V3_MESSAGE_AAD, parsed.ct, { recipientPublicKey: pkR }))
  return readV3(p, inner, decodeKey(recipient.publicKey, 'our'), message)
}

function tryOpen(fn: () => Uint8Array | null): Uint8Array {
  let pt: Uint8Array | null
  try {
    pt = fn()
  } catch {
    throw new DecryptError('bad_key', 'the encapsulated key is not a usable X25519 key')
  }
  if (!pt) throw new DecryptError('authentication_failed', 'the ciphertext does not authenticate: not for this key, not from this sender, or changed on the way')
  return pt
}

function readV3(p: CryptoPrimitives, inner: Uint8Array, recipientPk: Uint8Array, message: EncryptedMessageFields): OpenedMessage {
  const bad = (why: string) => new DecryptError('malformed', `the decrypted v3 plaintext is not well-formed: ${why}`)
  if (inner.length < 1 + 32 + 8 + 32 + 2) throw bad('it is shorter than its fixed fields')
  if (inner[0] !== V3_INNER_FORMAT) throw bad(`its layout byte is ${inner[0]}, not ${V3_INNER_FORMAT}`)
  let at = 1
  const senderPk = inner.subarray(at, (at += 32))
  const createdMs = readUint(inner, at, 8)
  at += 8
  const digest = inner.subarray(at, (at += 32))
  const ctLen = readUint(inner, at, 2)
  at += 2
  if (at + ctLen + 4 > inner.length) throw bad('the content type length runs past the end')
  const ctype = inner.subarray(at, (at += ctLen))
  const bodyLen = readUint(inner, at, 4)
  at += 4
  if (at + bodyLen + 64 > inner.length) throw bad('the body length runs past the end, leaving no room for the signature')
  const body = inner.subarray(at, (at += bodyLen))
  const signature = inner.subarray(at, (at += 64))
  // §14.4: the padding is zeros; anything else there is bytes the signature does not cover
  if (!isAllZero(inner.subarray(at))) throw bad('the padding after the signature is not all zeros')
  let contentType: string
  try {
    contentType = fromUtf8(ctype)
  } catch {
    throw bad('the content type is not UTF-8')
  }
  if (!equalBytes(digest, attachmentsDigest(p, message.attachments))) {
    throw new DecryptError('bad_signature', "the message's attachments are not the ones the sender signed")
  }
  if (!p.ed25519Verify(senderPk, signedBytes(p, senderPk, recipientPk, ctype, body, createdMs, digest), signature)) {
    throw new DecryptError('bad_signature', "the sender's signature inside the message does not verify")
  }
  const signer = toBase64Url(senderPk)
  const facts: EncryptionFacts = { version: 3, sender_verified: signer === message.sender_key, sealed_at: new Date(createdMs).toISOString() }
  if (!facts.sender_verified) facts.signer_key = signer
  return { content_type: contentType, body: decodeBody(contentType, body), encryption: facts }
}
