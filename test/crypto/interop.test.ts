// Interoperability with an independent HPKE implementation (@hpke/core) for MRP's v2 format, and with an
// independent writer of the attachment format (WebCrypto's AES-GCM and HKDF), in both directions.
import { describe, expect, test } from 'bun:test'
import { CipherSuite, HkdfSha256 } from '@hpke/core'
import { DhkemX25519HkdfSha256 } from '@hpke/dhkem-x25519'
import { Chacha20Poly1305 } from '@hpke/chacha20poly1305'
import { ed25519 } from '@noble/curves/ed25519.js'
import { generateKeyPair, type KeyPair } from '../../src/auth/sign.ts'
import { bindEncryption, ENCRYPTED_CONTENT_TYPE } from '../../src/crypto/index.ts'
import { nativePrimitives } from '../../src/crypto/native.ts'
import { purePrimitives } from '../../src/crypto/pure.ts'

const suite = new CipherSuite({ kem: new DhkemX25519HkdfSha256(), kdf: new HkdfSha256(), aead: new Chacha20Poly1305() })
const b64 = (b: ArrayBuffer | Uint8Array) => Buffer.from(b instanceof Uint8Array ? b : new Uint8Array(b)).toString('base64url')
const unb64 = (s: string) => new Uint8Array(Buffer.from(s, 'base64url'))
const ab = (u: Uint8Array) => u.slice().buffer as ArrayBuffer

// the conversion done independently: @noble/curves' own Edwards → Montgomery maps
const xPub = (k: KeyPair) => ed25519.utils.toMontgomery(unb64(k.publicKey))
const xSec = (k: KeyPair) => ed25519.utils.toMontgomerySecret(k.seed)
async function keyPair(k: KeyPair): Promise<CryptoKeyPair> {
  return { privateKey: await suite.kem.importKey('raw', ab(xSec(k)), false), publicKey: await suite.kem.importKey('raw', ab(xPub(k)), true) }
}

const alice = generateKeyPair()
const bob = generateKeyPair()
const EMPTY = new ArrayBuffer(0)

/** An MRP v2 message as an independent implementation writes it. */
async function theirV2(from: KeyPair, to: KeyPair, contentType: string, plaintext: string) {
  const sender = await suite.createSenderContext({
    recipientPublicKey: await suite.kem.importKey('raw', ab(xPub(to)), true),
    senderKey: await keyPair(from),
    info: EMPTY,
  })
  const ct = await sender.seal(ab(new TextEncoder().encode(plaintext)), EMPTY)
  return { v: 2, enc: b64(sender.enc), ct: b64(ct), ct_content_type: contentType }
}

async function theirOpen(from: KeyPair, to: KeyPair, enc: string, ct: string): Promise<Uint8Array> {
  const recipient = await suite.createRecipientContext({
    recipientKey: await keyPair(to),
    enc: ab(unb64(enc)),
    senderPublicKey: await suite.kem.importKey('raw', ab(xPub(from)), true),
    info: EMPTY,
  })
  return new Uint8Array(await recipient.open(ab(unb64(ct)), EMPTY))
}

/** The attachment format written with WebCrypto alone. */
async function theirBlob(dek: Uint8Array, pt: Uint8Array<ArrayBuffer>): Promise<Uint8Array> {
  const salt = crypto.getRandomValues(new Uint8Array(16))
  const ikm = await crypto.subtle.importKey('raw', ab(dek), 'HKDF', false, ['deriveKey'])
  const key = await crypto.subtle.deriveKey(
    { name: 'HKDF', hash: 'SHA-256', salt, info: new TextEncoder().encode('agent-relay e2e attachment v1') },
    ikm,
    { name: 'AES-GCM', length: 256 },
    false,
    ['encrypt'],
  )
  const parts: Uint8Array[] = [Uint8Array.of(1), salt]
  const n = Math.max(1, Math.ceil(pt.length / 65536))
  for (let i = 0; i < n; i++) {
    const iv = new Uint8Array(12)
    new DataView(iv.buffer).setUint32(7, i)
    iv[11] = i === n - 1 ? 1 : 0
    parts.push(new Uint8Array(await crypto.subtle.encrypt({ name: 'AES-GCM', iv }, key, ab(pt.subarray(i * 65536, (i + 1) * 65536)))))
  }
  return new Uint8Array(Buffer.concat(parts))
}

for (const p of [nativePrimitives, purePrimitives]) {
  const e2e = bindEncryption(p)
  describe(`MRP v2 with @hpke/core, ${p.name} primitives`, () => {
    test('they seal, we open (JSON and text)', async () => {
      const json = await theirV2(alice, bob, 'application/json', JSON.stringify({ hello: 'world' }))
      const msg = { sender_key: alice.publicKey, recipient_key: bob.publicKey, content_type: ENCRYPTED_CONTENT_TYPE, body: json }
      expect(e2e.openMessage(bob, msg)).toEqual({ content_type: 'application/json', body: { hello: 'world' }, encryption: { version: 2, sender_verified: true } })
      const text = await theirV2(alice, bob, 'text/plain', 'classified data')
      expect(e2e.openMessage(bob, { ...msg, body: text }).body).toBe('classified data')
    })

    test('we seal, they open', async () => {
      const sealed = e2e.sealMessage({ version: 2, sender: alice, recipientKey: bob.publicKey, contentType: 'text/plain', body: 'from us' })
      const pt = await theirOpen(alice, bob, sealed.body.enc, sealed.body.ct)
      expect(new TextDecoder().decode(pt)).toBe('from us')
      expect(sealed.body.ct_content_type).toBe('text/plain')
    })

    test('attachments: they wrap the key and write the bytes, we unwrap and decrypt; and the reverse', async () => {
      const dek = crypto.getRandomValues(new Uint8Array(32))
      const pt = crypto.getRandomValues(new Uint8Array(65536 * 2 + 5))
      const sender = await suite.createSenderContext({ recipientPublicKey: await suite.kem.importKey('raw', ab(xPub(bob)), true), senderKey: await keyPair(alice), info: EMPTY })
      const wrapped = { dek_enc: b64(sender.enc), dek_ct: b64(await sender.seal(ab(dek), EMPTY)) }
      const got = e2e.unwrapDek(bob, alice.publicKey, wrapped, 2)
      expect(Buffer.from(got.dek).equals(Buffer.from(dek))).toBe(true)
      expect(Buffer.from(await e2e.decryptBlob(got.dek, await theirBlob(dek, pt))).equals(Buffer.from(pt))).toBe(true)

      const ours = e2e.wrapDek({ version: 2, dek, sender: alice, recipientKey: bob.publicKey })
      expect(Buffer.from(await theirOpen(alice, bob, ours.dek_enc, ours.dek_ct)).equals(Buffer.from(dek))).toBe(true)
    })
  })
}
