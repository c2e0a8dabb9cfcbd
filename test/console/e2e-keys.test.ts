/**
 * The console's encryption layer (src/console/app/e2e.ts) outside the browser: Bun has the same
 * WebCrypto algorithms (Ed25519 sign, X25519 deriveBits on non-extractable keys), so the layer runs here
 * unchanged against the native primitives the client and the CLI use — both directions, both versions,
 * messages and attachments, and every failure with its reason. The browser test covers the pages.
 */
import { describe, expect, test } from 'bun:test'
import { join } from 'node:path'
import { encodeKeyFile, generateKeyPair } from '../../src/auth/sign.ts'
import { bindEncryption, ENCRYPTED_CONTENT_TYPE } from '../../src/crypto/index.ts'
import { nativePrimitives } from '../../src/crypto/native.ts'
import { ROOT } from '../support/binary.ts'

// browser code, checked with its own tsconfig (DOM types): loaded by path so the project check leaves it out
const { decryptAttachment, encryptFile, openForDisplay, sealForSend } = await import(join(ROOT, 'src/console/app/e2e.ts'))
const { identityFromFile } = await import(join(ROOT, 'src/console/app/keys.ts'))

const native = bindEncryption(nativePrimitives)
const consoleKeys = generateKeyPair()
const peer = generateKeyPair()
const identity = await identityFromFile(encodeKeyFile(consoleKeys))
const blobOf = (bytes: Uint8Array) => new Blob([bytes as Uint8Array<ArrayBuffer>])

describe('console encryption layer', () => {
  test('the X25519 half is kept non-extractable, for deriveBits only', () => {
    expect(identity.agreementKey).toBeDefined()
    expect([identity.agreementKey!.algorithm.name, identity.agreementKey!.extractable, identity.agreementKey!.usages]).toEqual(['X25519', false, ['deriveBits']])
    expect(identity.signingKey.extractable).toBe(false)
  })

  for (const version of [2, 3] as const) {
    test(`v${version}: opens what the native code seals, and seals what it opens (sender verified both ways)`, async () => {
      const sealed = native.sealMessage({ version, sender: peer, recipientKey: consoleKeys.publicKey, contentType: 'text/plain', body: `to the console v${version}` })
      const shown = await openForDisplay(identity, { sender_key: peer.publicKey, recipient_key: consoleKeys.publicKey, ...sealed })
      expect(shown).toMatchObject({ content_type: 'text/plain', body: `to the console v${version}`, lock: { version, sender_verified: true } })
      expect(shown.envelope).toEqual(sealed)

      const wire = await sealForSend(identity, { recipient_key: peer.publicKey, content_type: 'application/json', body: { text: `from the console v${version}` } }, version)
      expect(wire.content_type).toBe(ENCRYPTED_CONTENT_TYPE)
      const opened = native.openMessage(peer, { sender_key: consoleKeys.publicKey, recipient_key: peer.publicKey, content_type: wire.content_type, body: wire.body })
      expect(opened).toMatchObject({ content_type: 'application/json', body: { text: `from the console v${version}` }, encryption: { version, sender_verified: true } })
    })

    test(`v${version}: attachments both ways, bound to the message (v3 signs the wrapped key)`, async () => {
      const plain = new TextEncoder().encode('attachment bytes '.repeat(10_000))
      const file = await encryptFile(identity, new Blob([plain]), peer.publicKey, version)
      const attachment = { encrypted: true, dek_enc: file.dek_enc, dek_ct: file.dek_ct }
      const wire = await sealForSend(identity, { recipient_key: peer.publicKey, content_type: 'text/plain', body: 'see attached', attachments: [{ blob_id: 'blob_x', ...attachment }] }, version)
      const received = { sender_key: consoleKeys.publicKey, recipient_key: peer.publicKey, content_type: wire.content_type, body: wire.body, attachments: [attachment] }
      expect(native.openMessage(peer, received).encryption.sender_verified).toBe(true)
      const { dek } = native.unwrapDek(peer, consoleKeys.publicKey, attachment, version)
      const stored = new Uint8Array(await file.ciphertext.arrayBuffer())
      expect(await native.decryptBlob(dek, stored)).toEqual(plain)
      // what the upload signs
      expect(file.sha256).toEqual(new Uint8Array(await crypto.subtle.digest('SHA-256', stored)))

      const theirDek = native.newDek()
      const wrapped = native.wrapDek({ version, dek: theirDek, sender: peer, recipientKey: consoleKeys.publicKey })
      const sealed = native.sealMessage({ version, sender: peer, recipientKey: consoleKeys.publicKey, body: 'file', attachments: [wrapped] })
      const m = await openForDisplay(identity, { sender_key: peer.publicKey, recipient_key: consoleKeys.publicKey, ...sealed, attachments: [{ encrypted: true, ...wrapped }] })
      expect(m.lock.error).toBeUndefined()
      const blob = await decryptAttachment(identity, m, wrapped, blobOf(await native.encryptBlob(theirDek, plain)))
      expect(new Uint8Array(await blob.arrayBuffer())).toEqual(plain)
    })
  }

  test('failures carry their reason and never a body: tampered, unknown version, for another key, no X25519 half; a changed attachment fails the download', async () => {
    const sealed = native.sealMessage({ version: 3, sender: peer, recipientKey: consoleKeys.publicKey, body: { text: 'secret' } })
    const envelope = (body: unknown) => ({ sender_key: peer.publicKey, recipient_key: consoleKeys.publicKey, content_type: ENCRYPTED_CONTENT_TYPE, body })
    const ct = Buffer.from(sealed.body.ct, 'base64url')
    ct[ct.length - 1]! ^= 1
    const cases: [unknown, string][] = [
      [{ ...sealed.body, ct: ct.toString('base64url') }, 'authentication_failed'],
      [{ ...sealed.body, v: 4 }, 'unsupported_version'],
      [{ v: 3, enc: 'AA', ct: sealed.body.ct }, 'malformed'],
      [native.sealMessage({ version: 3, sender: peer, recipientKey: generateKeyPair().publicKey, body: 1 }).body, 'authentication_failed'],
    ]
    for (const [body, reason] of cases) {
      const shown = await openForDisplay(identity, envelope(body))
      expect(shown.lock.error.reason).toBe(reason)
      expect(shown.body).toEqual(body) // still the envelope: the page shows the reason, not this
    }
    const old = { ...identity, agreementKey: undefined }
    expect((await openForDisplay(old, envelope(sealed.body))).lock.error.reason).toBe('no_key')
    await expect(sealForSend(old, { recipient_key: peer.publicKey, body: 'x' }, 3)).rejects.toThrow('Import its key file again')
    // our own message to someone else: sealed to them, shown as such
    expect((await openForDisplay(identity, { ...envelope(sealed.body), sender_key: consoleKeys.publicKey, recipient_key: peer.publicKey })).lock).toMatchObject({ outgoing: true })

    const dek = native.newDek()
    const wrapped = native.wrapDek({ version: 3, dek, sender: peer, recipientKey: consoleKeys.publicKey })
    const stored = await native.encryptBlob(dek, new Uint8Array(100_000))
    stored[50_000]! ^= 1
    const signed = native.sealMessage({ version: 3, sender: peer, recipientKey: consoleKeys.publicKey, body: 'file', attachments: [wrapped] })
    const m = await openForDisplay(identity, { sender_key: peer.publicKey, recipient_key: consoleKeys.publicKey, ...signed, attachments: [{ encrypted: true, ...wrapped }] })
    await expect(decryptAttachment(identity, m, wrapped, blobOf(stored))).rejects.toMatchObject({ reason: 'authentication_failed' })
    // with no encrypted body, a key wrapped in Base mode vouches for nothing (the operator could have made it);
    // one wrapped in HPKE Auth mode names its sender, as MRP's attachment-only messages do
    const clean = await native.encryptBlob(dek, new Uint8Array(100))
    const bare = { sender_key: peer.publicKey, recipient_key: consoleKeys.publicKey, content_type: 'application/json', body: null, attachments: [{ encrypted: true, ...wrapped }] }
    await expect(decryptAttachment(identity, await openForDisplay(identity, bare), wrapped, blobOf(clean))).rejects.toMatchObject({ reason: 'unauthenticated' })
    const auth = native.wrapDek({ version: 2, dek, sender: peer, recipientKey: consoleKeys.publicKey })
    const bareV2 = { ...bare, attachments: [{ encrypted: true, ...auth }] }
    expect((await decryptAttachment(identity, await openForDisplay(identity, bareV2), auth, blobOf(clean))).size).toBe(100)
  })
})
