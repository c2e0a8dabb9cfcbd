// Interoperability with an independent HPKE implementation (@hpke/core) for MRP's v2 format, and with an
// independent writer and reader of the attachment format (WebCrypto's AES-GCM and HKDF), in both
// directions, on both primitive sets. The independent side is test/support/independent-*.ts.
import { describe, expect, test } from 'bun:test'
import { ed25519 } from '@noble/curves/ed25519.js'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { bindEncryption, ENCRYPTED_CONTENT_TYPE } from '../../src/crypto/index.ts'
import { nativePrimitives } from '../../src/crypto/native.ts'
import { purePrimitives } from '../../src/crypto/pure.ts'
import { readEncryptedBlob, writeEncryptedBlob } from '../support/independent-blob.ts'
import { openAuth, sealV2Body, unb64u, unwrapDekV2, wrapDekV2, xPublicOf, xSecretOf } from '../support/independent-hpke.ts'

const alice = generateKeyPair()
const bob = generateKeyPair()
const same = (a: Uint8Array, b: Uint8Array) => Buffer.from(a).equals(Buffer.from(b))

test("the independent key conversion agrees with @noble/curves' Edwards → Montgomery maps", () => {
  for (let i = 0; i < 20; i++) {
    const k = generateKeyPair()
    expect(same(xPublicOf(k.publicKey), ed25519.utils.toMontgomery(unb64u(k.publicKey)))).toBe(true)
    expect(same(xSecretOf(k.seed), ed25519.utils.toMontgomerySecret(k.seed))).toBe(true)
  }
})

for (const p of [nativePrimitives, purePrimitives]) {
  const e2e = bindEncryption(p)
  describe(`MRP v2 with @hpke/core, ${p.name} primitives`, () => {
    test('they seal, we open (JSON and text)', async () => {
      const json = await sealV2Body(alice, bob.publicKey, 'application/json', { hello: 'world' })
      const msg = { sender_key: alice.publicKey, recipient_key: bob.publicKey, content_type: ENCRYPTED_CONTENT_TYPE, body: json }
      expect(e2e.openMessage(bob, msg)).toEqual({ content_type: 'application/json', body: { hello: 'world' }, encryption: { version: 2, sender_verified: true } })
      const text = await sealV2Body(alice, bob.publicKey, 'text/plain', 'classified data')
      expect(e2e.openMessage(bob, { ...msg, body: text }).body).toBe('classified data')
    })

    test('we seal, they open', async () => {
      const sealed = e2e.sealMessage({ version: 2, sender: alice, recipientKey: bob.publicKey, contentType: 'text/plain', body: 'from us' })
      const pt = await openAuth(bob, alice.publicKey, sealed.body)
      expect(new TextDecoder().decode(pt)).toBe('from us')
      expect(sealed.body.ct_content_type).toBe('text/plain')
    })

    test('attachments: they wrap the key and write the bytes, we unwrap and decrypt; and the reverse', async () => {
      const dek = crypto.getRandomValues(new Uint8Array(32))
      const pt = crypto.getRandomValues(new Uint8Array(65536 * 2 + 5))
      const got = e2e.unwrapDek(bob, alice.publicKey, await wrapDekV2(alice, bob.publicKey, dek), 2)
      expect(same(got.dek, dek)).toBe(true)
      expect(same(await e2e.decryptBlob(got.dek, await writeEncryptedBlob(dek, pt)), pt)).toBe(true)

      const ours = e2e.wrapDek({ version: 2, dek, sender: alice, recipientKey: bob.publicKey })
      expect(same(await unwrapDekV2(bob, alice.publicKey, ours), dek)).toBe(true)
      expect(same(await readEncryptedBlob(dek, await e2e.encryptBlob(dek, pt)), pt)).toBe(true)
    })
  })
}
