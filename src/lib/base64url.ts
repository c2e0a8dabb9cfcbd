/** Unpadded base64url helpers (keys, signatures and hashes use this encoding). */

const STRICT = /^[A-Za-z0-9_-]*$/
const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'
/** The 6-bit value of each alphabet character, by character code. */
const SEXTET = new Uint8Array(128)
for (let i = 0; i < ALPHABET.length; i++) SEXTET[ALPHABET.charCodeAt(i)] = i

export function encodeBase64Url(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64url')
}

/**
 * Decodes strict unpadded base64url; returns null for any other alphabet, padding, or a length that
 * cannot come from unpadded encoding. Non-canonical trailing bits are rejected too, so one value has one
 * spelling: a text whose length is 2 more than a multiple of 4 ends in a character that carries 4 unused
 * bits, 3 more, one that carries 2; those bits must be zero.
 */
export function decodeBase64Url(text: string): Uint8Array | null {
  if (!STRICT.test(text)) return null
  const rest = text.length % 4
  if (rest === 1) return null
  if (rest !== 0 && (SEXTET[text.charCodeAt(text.length - 1)]! & (rest === 2 ? 0x0f : 0x03)) !== 0) return null
  const bytes = Buffer.from(text, 'base64url')
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength)
}
