/**
 * docs/protocol.md §14.1–14.3 and the key wrapping of §14.5, written a second time from the text alone
 * with @hpke/core (HPKE) and node:crypto (SHA-512, the key conversion's arithmetic) — none of src/crypto —
 * so that tests can show that the relay's own clients interoperate with an implementation they share no
 * code with.
 */
import { CipherSuite, HkdfSha256 } from '@hpke/core'
import { Chacha20Poly1305 } from '@hpke/chacha20poly1305'
import { DhkemX25519HkdfSha256 } from '@hpke/dhkem-x25519'
import { createHash } from 'node:crypto'

/** §14.2: DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, ChaCha20-Poly1305. */
export const suite = new CipherSuite({ kem: new DhkemX25519HkdfSha256(), kdf: new HkdfSha256(), aead: new Chacha20Poly1305() })

/** An agent's key as the tests hold it: the Ed25519 seed and the public key in base64url. */
export interface EdKeys {
  seed: Uint8Array
  publicKey: string
}

export const b64u = (bytes: ArrayBuffer | Uint8Array): string => Buffer.from(bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes)).toString('base64url')
export const unb64u = (text: string): Uint8Array => new Uint8Array(Buffer.from(text, 'base64url'))
const ab = (bytes: Uint8Array): ArrayBuffer => bytes.slice().buffer as ArrayBuffer
const EMPTY = new ArrayBuffer(0)

const P = 2n ** 255n - 19n

/** §14.1, public half: u = (1 + y) / (1 − y) mod p, written little-endian. */
export function xPublicOf(edPublicKey: string): Uint8Array {
  const bytes = unb64u(edPublicKey)
  const y = BigInt('0x' + Buffer.from(bytes).reverse().toString('hex')) & ((1n << 255n) - 1n)
  // the inverse by Fermat: (1 − y)^(p − 2)
  let inverse = 1n
  for (let base = (((1n - y) % P) + P) % P, e = P - 2n; e > 0n; e >>= 1n, base = (base * base) % P) if (e & 1n) inverse = (inverse * base) % P
  const u = ((1n + y) * inverse) % P
  return new Uint8Array(Buffer.from(u.toString(16).padStart(64, '0'), 'hex').reverse())
}

/** §14.1, secret half: the first 32 bytes of SHA-512(seed), clamped. */
export function xSecretOf(seed: Uint8Array): Uint8Array {
  const h = new Uint8Array(createHash('sha512').update(seed).digest().subarray(0, 32))
  h[0]! &= 248
  h[31]! &= 127
  h[31]! |= 64
  return h
}

const publicKey = (edPublicKey: string) => suite.kem.importKey('raw', ab(xPublicOf(edPublicKey)), true)
async function keyPair(k: EdKeys): Promise<CryptoKeyPair> {
  return { privateKey: await suite.kem.importKey('raw', ab(xSecretOf(k.seed)), false), publicKey: await publicKey(k.publicKey) }
}

export interface Sealed {
  enc: string
  ct: string
}

/** HPKE Auth mode from `from` to the holder of `toKey` (v2 bodies and wrapped keys: empty info and aad). */
export async function sealAuth(from: EdKeys, toKey: string, plaintext: Uint8Array, info: Uint8Array = new Uint8Array(0)): Promise<Sealed> {
  const { enc, ct } = await suite.seal({ recipientPublicKey: await publicKey(toKey), senderKey: await keyPair(from), info: ab(info) }, ab(plaintext), EMPTY)
  return { enc: b64u(enc), ct: b64u(ct) }
}

/** Opens HPKE Auth mode as `to`; throws unless the holder of `fromKey` sealed it. */
export async function openAuth(to: EdKeys, fromKey: string, sealed: Sealed, info: Uint8Array = new Uint8Array(0)): Promise<Uint8Array> {
  const params = { recipientKey: await keyPair(to), enc: ab(unb64u(sealed.enc)), senderPublicKey: await publicKey(fromKey), info: ab(info) }
  return new Uint8Array(await suite.open(params, ab(unb64u(sealed.ct)), EMPTY))
}

/** HPKE Base mode to the holder of `toKey` (v3). */
export async function sealBase(toKey: string, plaintext: Uint8Array, info: Uint8Array): Promise<Sealed> {
  const { enc, ct } = await suite.seal({ recipientPublicKey: await publicKey(toKey), info: ab(info) }, ab(plaintext), EMPTY)
  return { enc: b64u(enc), ct: b64u(ct) }
}

/** Opens HPKE Base mode as `to`. */
export async function openBase(to: EdKeys, sealed: Sealed, info: Uint8Array): Promise<Uint8Array> {
  return new Uint8Array(await suite.open({ recipientKey: await keyPair(to), enc: ab(unb64u(sealed.enc)), info: ab(info) }, ab(unb64u(sealed.ct)), EMPTY))
}

const isJsonType = (contentType: string) => contentType === 'application/json' || /^[^/]+\/[^/]+\+json$/.test(contentType)

/** §14.3: an MRP v2 body `{v: 2, enc, ct, ct_content_type}` of `body` (JSON types as JSON text, else a string's UTF-8). */
export async function sealV2Body(from: EdKeys, toKey: string, contentType: string, body: unknown) {
  const text = isJsonType(contentType) || typeof body !== 'string' ? JSON.stringify(body) : body
  return { v: 2, ...(await sealAuth(from, toKey, new TextEncoder().encode(text))), ct_content_type: contentType }
}

/** §14.3, the recipient's side: the plaintext body of a received v2 message; throws unless `sender_key` sealed it. */
export async function openV2Body(to: EdKeys, message: { sender_key: string; body: { v: number; enc: string; ct: string; ct_content_type: string } }): Promise<unknown> {
  if (message.body.v !== 2) throw new Error(`expected a v2 body, got v${message.body.v}`)
  const text = new TextDecoder('utf-8', { fatal: true }).decode(await openAuth(to, message.sender_key, message.body))
  return isJsonType(message.body.ct_content_type) ? JSON.parse(text) : text
}

/** §14.5, v2: the DEK wrapped with HPKE Auth mode, as the attachment's `dek_enc` / `dek_ct`. */
export async function wrapDekV2(from: EdKeys, toKey: string, dek: Uint8Array): Promise<{ dek_enc: string; dek_ct: string }> {
  const { enc, ct } = await sealAuth(from, toKey, dek)
  return { dek_enc: enc, dek_ct: ct }
}

/** §14.5, v2: the DEK of a received attachment; throws unless `fromKey` wrapped it for `to`. */
export async function unwrapDekV2(to: EdKeys, fromKey: string, attachment: { dek_enc: string; dek_ct: string }): Promise<Uint8Array> {
  return openAuth(to, fromKey, { enc: attachment.dek_enc, ct: attachment.dek_ct })
}
