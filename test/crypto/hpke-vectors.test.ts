// RFC 9180's published vectors for the one suite we use, on both primitive sets.
import { describe, expect, test } from 'bun:test'
import vectors from './fixtures/rfc9180-x25519-sha256-chacha20poly1305.json'
import { fromHex, toHex } from '../../src/crypto/bytes.ts'
import { MODE_AUTH, MODE_BASE, deriveKeyPair, setupRecipient, setupSender } from '../../src/crypto/hpke.ts'
import { nativePrimitives } from '../../src/crypto/native.ts'
import { purePrimitives } from '../../src/crypto/pure.ts'

for (const prims of [nativePrimitives, purePrimitives]) {
  describe(`RFC 9180 vectors, ${prims.name} primitives`, () => {
    for (const v of vectors.vectors as any[]) {
      const mode = v.mode === MODE_BASE ? 'Base' : v.mode === MODE_AUTH ? 'Auth' : String(v.mode)
      const auth = v.mode === MODE_AUTH

      test(`${mode}: DeriveKeyPair gives the published keys`, () => {
        expect(v.kem_id).toBe(32)
        expect(v.kdf_id).toBe(1)
        expect(v.aead_id).toBe(3)
        const e = deriveKeyPair(prims, fromHex(v.ikmE))
        expect(toHex(e.secretKey)).toBe(v.skEm)
        expect(toHex(e.publicKey)).toBe(v.pkEm)
        const r = deriveKeyPair(prims, fromHex(v.ikmR))
        expect(toHex(r.secretKey)).toBe(v.skRm)
        expect(toHex(r.publicKey)).toBe(v.pkRm)
        if (auth) expect(toHex(deriveKeyPair(prims, fromHex(v.ikmS)).publicKey)).toBe(v.pkSm)
      })

      test(`${mode}: the sender's context, ciphertexts and exports match`, () => {
        const { enc, context } = setupSender(prims, fromHex(v.pkRm), fromHex(v.info), {
          ephemeralSecretKey: fromHex(v.skEm),
          senderSecretKey: auth ? fromHex(v.skSm) : undefined,
        })
        expect(toHex(enc)).toBe(v.enc)
        expect(toHex(context.key)).toBe(v.key)
        expect(toHex(context.baseNonce)).toBe(v.base_nonce)
        expect(toHex(context.exporterSecret)).toBe(v.exporter_secret)
        let seq = 0
        for (const e of v.encryptions) {
          context.skip(e.sequence_number - seq)
          expect(toHex(context.seal(fromHex(e.aad), fromHex(e.pt)))).toBe(e.ct)
          seq = e.sequence_number + 1
        }
        for (const x of v.exports) expect(toHex(context.export(fromHex(x.exporter_context), x.L))).toBe(x.exported_value)
      })

      test(`${mode}: the recipient opens every published ciphertext and refuses a changed one`, () => {
        const context = setupRecipient(prims, fromHex(v.enc), fromHex(v.skRm), fromHex(v.info), {
          senderPublicKey: auth ? fromHex(v.pkSm) : undefined,
        })
        expect(toHex(context.key)).toBe(v.key)
        let seq = 0
        for (const e of v.encryptions) {
          context.skip(e.sequence_number - seq)
          const ct = fromHex(e.ct)
          const bad = ct.slice()
          bad[0]! ^= 1
          expect(context.open(fromHex(e.aad), bad)).toBeNull()
          expect(toHex(context.open(fromHex(e.aad), ct)!)).toBe(e.pt)
          seq = e.sequence_number + 1
        }
      })
    }

    test('Auth mode with the wrong sender key does not open', () => {
      const v = (vectors.vectors as any[]).find((x) => x.mode === MODE_AUTH)
      const other = deriveKeyPair(prims, fromHex(v.ikmR)).publicKey
      const context = setupRecipient(prims, fromHex(v.enc), fromHex(v.skRm), fromHex(v.info), { senderPublicKey: other })
      expect(context.open(fromHex(v.encryptions[0].aad), fromHex(v.encryptions[0].ct))).toBeNull()
    })
  })
}
