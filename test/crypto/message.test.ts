// v2 and v3 message bodies on both primitive sets: round trips, what each version proves, and that
// every changed byte is refused with a reason.
import { describe, expect, test } from 'bun:test'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { bindEncryption, DecryptError, ENCRYPTED_CONTENT_TYPE } from '../../src/crypto/index.ts'
import { fromBase64Url, toBase64Url } from '../../src/crypto/bytes.ts'
import { nativePrimitives } from '../../src/crypto/native.ts'
import { purePrimitives } from '../../src/crypto/pure.ts'

const alice = generateKeyPair()
const bob = generateKeyPair()
const carol = generateKeyPair()

function reasonOf(fn: () => unknown): string {
  try {
    fn()
  } catch (err) {
    if (err instanceof DecryptError) return err.reason
    throw err
  }
  return 'opened'
}

const envelope = (sealed: { content_type: string; body: unknown }, sender = alice.publicKey, recipient = bob.publicKey, attachments?: any[]) => ({
  sender_key: sender,
  recipient_key: recipient,
  content_type: sealed.content_type,
  body: sealed.body,
  attachments,
})

const native = bindEncryption(nativePrimitives)
const pure = bindEncryption(purePrimitives)

for (const [sealer, opener] of [
  [native, native],
  [native, pure],
  [pure, native],
] as const) {
  describe(`${sealer.primitives.name} seals, ${opener.primitives.name} opens`, () => {
    for (const version of [2, 3] as const) {
      test(`v${version}: JSON and text bodies come back as sent`, () => {
        const body = { task: 'summarise', items: [1, 2, 3], note: 'marker-ünïcødé' }
        const sealed = sealer.sealMessage({ version, sender: alice, recipientKey: bob.publicKey, body })
        expect(sealed.content_type).toBe(ENCRYPTED_CONTENT_TYPE)
        expect(sealed.body.v).toBe(version)
        expect(JSON.stringify(sealed.body)).not.toContain('marker')
        const opened = opener.openMessage(bob, envelope(sealed))
        expect(opened.body).toEqual(body)
        expect(opened.content_type).toBe('application/json')
        expect(opened.encryption.version).toBe(version)
        expect(opened.encryption.sender_verified).toBe(true)

        const text = sealer.sealMessage({ version, sender: alice, recipientKey: bob.publicKey, contentType: 'text/plain', body: 'hello' })
        expect(opener.openMessage(bob, envelope(text))).toMatchObject({ content_type: 'text/plain', body: 'hello' })
      })

      test(`v${version}: another recipient, or a message relabelled to another recipient, does not open`, () => {
        const sealed = sealer.sealMessage({ version, sender: alice, recipientKey: bob.publicKey, body: { x: 1 } })
        expect(reasonOf(() => opener.openMessage(carol, envelope(sealed, alice.publicKey, carol.publicKey)))).toBe('authentication_failed')
        expect(reasonOf(() => opener.openMessage(carol, envelope(sealed)))).toBe('bad_key')
      })

      test(`v${version}: flipping any byte of enc or ct is refused`, () => {
        const sealed = sealer.sealMessage({ version, sender: alice, recipientKey: bob.publicKey, body: 'x' })
        for (const field of ['enc', 'ct'] as const) {
          const bytes = fromBase64Url(sealed.body[field])!
          for (let i = 0; i < bytes.length; i++) {
            const bad = bytes.slice()
            bad[i]! ^= 0x01
            const reason = reasonOf(() => opener.openMessage(bob, envelope({ ...sealed, body: { ...sealed.body, [field]: toBase64Url(bad) } })))
            expect(['authentication_failed', 'bad_key']).toContain(reason)
          }
        }
      })
    }

    test('v2 names its sender: the same ciphertext under another sender_key does not open', () => {
      const sealed = sealer.sealMessage({ version: 2, sender: alice, recipientKey: bob.publicKey, body: 'x' })
      expect(reasonOf(() => opener.openMessage(bob, envelope(sealed, carol.publicKey)))).toBe('authentication_failed')
    })

    test('v3 carries its signer: another sender_key opens but is not verified, and names the signer', () => {
      const sealed = sealer.sealMessage({ version: 3, sender: alice, recipientKey: bob.publicKey, body: 'x' })
      const opened = opener.openMessage(bob, envelope(sealed, carol.publicKey))
      expect(opened.encryption.sender_verified).toBe(false)
      expect(opened.encryption.signer_key).toBe(alice.publicKey)
    })

    test('v3 signs the attachments: a swapped wrapped key is refused', () => {
      const dek = sealer.newDek()
      const wrapped = sealer.wrapDek({ version: 3, dek, sender: alice, recipientKey: bob.publicKey })
      const sealed = sealer.sealMessage({ version: 3, sender: alice, recipientKey: bob.publicKey, body: 'x', attachments: [wrapped] })
      const att = [{ blob_id: 'b', encrypted: true, ...wrapped }]
      expect(opener.openMessage(bob, envelope(sealed, alice.publicKey, bob.publicKey, att)).encryption.sender_verified).toBe(true)
      const other = sealer.wrapDek({ version: 3, dek, sender: alice, recipientKey: bob.publicKey })
      expect(reasonOf(() => opener.openMessage(bob, envelope(sealed, alice.publicKey, bob.publicKey, [{ ...att[0], ...other }])))).toBe('bad_signature')
      expect(reasonOf(() => opener.openMessage(bob, envelope(sealed, alice.publicKey, bob.publicKey, [])))).toBe('bad_signature')
    })
  })
}

describe('v3 padding and shapes', () => {
  test('short messages of different lengths have the same ciphertext length', () => {
    const sizes = new Set(['a', 'a'.repeat(50), 'a'.repeat(90)].map((body) => native.sealMessage({ version: 3, sender: alice, recipientKey: bob.publicKey, body }).body.ct.length))
    expect(sizes.size).toBe(1)
  })

  test('unknown versions and broken shapes come back as reasons, not exceptions of another kind', () => {
    const sealed = native.sealMessage({ version: 3, sender: alice, recipientKey: bob.publicKey, body: 'x' })
    expect(reasonOf(() => native.openMessage(bob, envelope({ ...sealed, body: { ...sealed.body, v: 9 } })))).toBe('unsupported_version')
    expect(reasonOf(() => native.openMessage(bob, envelope({ ...sealed, body: 'garbage' })))).toBe('malformed')
    expect(reasonOf(() => native.openMessage(bob, envelope({ ...sealed, body: { v: 2, enc: 'x', ct: 'y', ct_content_type: 'a' } })))).toBe('malformed')
    expect(reasonOf(() => native.openMessage(bob, envelope({ ...sealed, body: { ...sealed.body, enc: toBase64Url(new Uint8Array(32)) } })))).toBe('bad_key')
  })
})
