/**
 * The strict base64url decoder: one spelling per value. A text whose length leaves unused bits in its
 * last character is refused unless those bits are zero; so is any other alphabet, padding, or a length
 * no unpadded encoding produces. Checked against Node's encoder as the oracle, over every length up to
 * 12 and every possible last character.
 */
import { expect, test } from 'bun:test'
import { decodeBase64Url, encodeBase64Url } from '../../src/lib/base64url.ts'

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'

test('accepts exactly the texts that encoding produces, and decodes them to their bytes', () => {
  let accepted = 0
  let refused = 0
  for (let length = 0; length <= 12; length++) {
    for (const last of ALPHABET) {
      const text = length === 0 ? '' : 'Qk9'.repeat(4).slice(0, length - 1) + last
      const bytes = Buffer.from(text, 'base64url')
      const canonical = length % 4 !== 1 && bytes.toString('base64url') === text
      const decoded = decodeBase64Url(text)
      if (canonical) {
        expect(decoded && Buffer.from(decoded).equals(bytes)).toBe(true)
        accepted++
      } else {
        expect(decoded).toBeNull()
        refused++
      }
      if (length === 0) break
    }
  }
  // lengths 4k: all 64 last characters; 4k+2: 4 of them; 4k+3: 16; 4k+1: none
  expect({ accepted, refused }).toEqual({ accepted: 1 + 3 * 64 + 3 * 4 + 3 * 16, refused: 3 * 64 + 3 * 60 + 3 * 48 })
})

test('refuses padding, other alphabets and white space; round-trips random bytes of every length', () => {
  for (const text of ['QQ==', 'QQ=', 'Q+8', 'Q/8', 'QQ ', ' QQ', 'QQ\n', 'Q-_*']) expect(decodeBase64Url(text)).toBeNull()
  for (let n = 0; n < 70; n++) {
    const bytes = crypto.getRandomValues(new Uint8Array(n))
    expect(Buffer.from(decodeBase64Url(encodeBase64Url(bytes))!).equals(Buffer.from(bytes))).toBe(true)
  }
})
