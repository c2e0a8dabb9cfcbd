/**
 * The console's signing code (src/console/app/keys.ts, WebCrypto only) against the shared test
 * vectors: the same public key from a seed, the same body hashes and the same signatures as the
 * relay's own code. Run on the runtime's WebCrypto; the browser test runs it in Chromium end to end.
 */
import { describe, expect, test } from 'bun:test'
import { join } from 'node:path'
import vectors from '../fixtures/test-vectors.json'
import { ROOT } from '../support/binary.ts'

// browser code, checked with its own tsconfig (DOM types): loaded by path so the project check leaves it out
const keysModule = join(ROOT, 'src/console/app/keys.ts')
const keys = await import(keysModule)

const seedFile = (hex: string, publicKey?: string) =>
  JSON.stringify({ public_key: publicKey, private_key: Buffer.from(hex, 'hex').toString('base64url') })

describe('console signing', () => {
  test('every request vector: public key, body hash and signature', async () => {
    for (const v of vectors.requests) {
      const id = await keys.identityFromFile(seedFile(v.private_seed_hex))
      expect(id.publicKey).toBe(v.public_key)
      expect(await keys.bodyHash(new TextEncoder().encode(v.body ?? ''))).toBe(v.body_hash)
      expect(await keys.signText(id, v.canonical_string)).toBe(v.signature)
    }
  })

  test('the WebSocket auth vector', async () => {
    const w = vectors.websocket
    const id = await keys.identityFromFile(seedFile(w.private_seed_hex))
    expect(id.publicKey).toBe(w.frame.public_key)
    expect(await keys.signText(id, `WS\n${w.frame.timestamp}`)).toBe(w.frame.signature)
  })

  test('a key file whose public key does not match its seed, or is not one, is refused', async () => {
    const v = vectors.requests[0]
    await expect(keys.identityFromFile(seedFile(v.private_seed_hex, 'PUAXw-hDiVqStwqnTRt-vJyYLM8uxJaMwM1V8Sr0Zgw'))).rejects.toThrow(/does not match/)
    await expect(keys.identityFromFile('not json')).rejects.toThrow(/a key file holds one of: relay keygen JSON/)
    await expect(keys.identityFromFile('{"private_key":"short"}')).rejects.toThrow(/no private_key/)
  })

  test('a generated key round-trips through its key file', async () => {
    const id = await keys.generateIdentity()
    const again = await keys.identityFromFile(id.file)
    expect(again.publicKey).toBe(id.publicKey)
    expect(JSON.parse(id.file)).toEqual({ public_key: id.publicKey, private_key: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) })
  })
})
