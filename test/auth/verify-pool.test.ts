import { describe, expect, test } from 'bun:test'
import { VerifyPool } from '../../src/auth/verify-pool.ts'
import { decodePublicKey, decodeSignature } from '../../src/auth/keys.ts'
import vectors from '../fixtures/test-vectors.json'

const cases = vectors.requests.map((v) => ({ key: decodePublicKey(v.public_key)!, text: v.canonical_string, sig: decodeSignature(v.signature)! }))

describe('VerifyPool', () => {
  for (const useWorker of [false, true]) {
    test(`${useWorker ? 'worker' : 'inline'}: valid and tampered signatures, many at once`, async () => {
      const pool = new VerifyPool(useWorker)
      try {
        const jobs = Array.from({ length: 40 }, (_, i) => {
          const c = cases[i % cases.length]
          return pool.verify(c.key, i % 3 === 0 ? c.text + 'x' : c.text, c.sig).then((ok) => ({ i, ok }))
        })
        for (const { i, ok } of await Promise.all(jobs)) expect(ok).toBe(i % 3 !== 0)
        // a busy turn (40 waiting) starts the worker when allowed
        expect(pool.usesWorker).toBe(useWorker)
      } finally {
        pool.stop()
      }
    })
  }

  test('an idle pool verifies inline and starts no thread', async () => {
    const pool = new VerifyPool(true)
    const c = cases[0]
    expect(await pool.verify(c.key, c.text, c.sig)).toBe(true)
    expect(pool.usesWorker).toBe(false)
    pool.stop()
  })

  test('a non-canonical scalar is refused before any thread sees it', async () => {
    const pool = new VerifyPool(true)
    const c = cases[0]
    const bad = new Uint8Array(c.sig)
    bad[63] |= 0xf0 // S ≥ L
    expect(await pool.verify(c.key, c.text, bad)).toBe(false)
    pool.stop()
  })
})
