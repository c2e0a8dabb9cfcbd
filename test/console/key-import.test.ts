/**
 * The console's key import (src/console/app/keys.ts) outside the browser (Bun has the same WebCrypto):
 * every key file format `--key` reads gives the same key, as bytes from the file picker or as pasted
 * text; anything else is refused naming the formats. The browser test imports a raw seed file.
 */
import { describe, expect, test } from 'bun:test'
import { join } from 'node:path'
import { KEY_FILE_FORMATS } from '../../src/auth/key-file-formats.ts'
import { decodeKeyFile, encodeKeyFile, generateKeyPair } from '../../src/auth/sign.ts'
import { ROOT } from '../support/binary.ts'

// browser code, checked with its own tsconfig (DOM types): loaded by path so the project check leaves it out
const { identityFromFile } = await import(join(ROOT, 'src/console/app/keys.ts'))

const keys = generateKeyPair()
const seed = Buffer.from(keys.seed)
const pub = Buffer.from(keys.publicKey, 'base64url')
const both = Buffer.concat([seed, pub])

/** Each format, as the bytes of a file: what the CLI's --key reads too. */
const FILES: [string, Uint8Array][] = [
  ['relay keygen JSON', Buffer.from(encodeKeyFile(keys))],
  ['raw 32-byte seed (mrp-sdk Keypair.save)', seed],
  ['64-byte seed + public key', both],
  ['seed in hex, with a newline', Buffer.from(`${seed.toString('hex')}\n`)],
  ['seed in upper-case hex', Buffer.from(seed.toString('hex').toUpperCase())],
  ['seed + public key in hex', Buffer.from(both.toString('hex'))],
  ['seed in base64 (padded)', Buffer.from(seed.toString('base64'))],
  ['seed in base64url', Buffer.from(seed.toString('base64url'))],
  ['seed + public key in base64', Buffer.from(both.toString('base64'))],
]

describe('the console imports every key file format --key reads', () => {
  for (const [name, bytes] of FILES) {
    test(name, async () => {
      expect(decodeKeyFile(bytes).publicKey).toBe(keys.publicKey) // the CLI agrees
      const fromBytes = await identityFromFile(new Uint8Array(bytes))
      expect(fromBytes.publicKey).toBe(keys.publicKey)
      expect(fromBytes.agreementKey).toBeDefined()
      // the file offered for export afterwards is relay keygen's JSON
      expect(decodeKeyFile(fromBytes.file!).publicKey).toBe(keys.publicKey)
      // pasted: text formats only (a raw seed is not text)
      if (name.startsWith('raw') || name.startsWith('64-byte')) return
      expect((await identityFromFile(new TextDecoder().decode(bytes))).publicKey).toBe(keys.publicKey)
    })
  }

  test('a signature made with the imported key verifies as that key', async () => {
    const id = await identityFromFile(new Uint8Array(seed))
    const data = new TextEncoder().encode('signed in the console')
    const sig = new Uint8Array(await crypto.subtle.sign('Ed25519', id.signingKey, data))
    const verifier = await crypto.subtle.importKey('raw', pub, { name: 'Ed25519' }, false, ['verify'])
    expect(await crypto.subtle.verify('Ed25519', verifier, sig, data)).toBe(true)
  })

  test('anything else is refused naming the formats; halves that do not belong together are refused', async () => {
    for (const junk of [Buffer.from('not a key'), Buffer.alloc(31, 7), Buffer.from('ab'.repeat(31)), Buffer.from(seed.toString('base64').slice(0, 40))]) {
      await expect(identityFromFile(new Uint8Array(junk))).rejects.toThrow(KEY_FILE_FORMATS)
    }
    const other = Buffer.from(generateKeyPair().publicKey, 'base64url')
    await expect(identityFromFile(new Uint8Array(Buffer.concat([seed, other])))).rejects.toThrow('second half is not the public key')
    await expect(identityFromFile(JSON.stringify({ public_key: generateKeyPair().publicKey, private_key: seed.toString('base64url') }))).rejects.toThrow('does not match')
    await expect(identityFromFile('{"private_key": 1')).rejects.toThrow('does not parse')
  })
})
