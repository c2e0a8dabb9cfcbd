/** Unpadded base64url helpers (keys, signatures and hashes use this encoding). */

const STRICT = /^[A-Za-z0-9_-]*$/

export function encodeBase64Url(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64url')
}

/**
 * Decodes strict unpadded base64url; returns null for any other alphabet, padding, or a length that
 * cannot come from unpadded encoding. Non-canonical trailing bits are rejected too, so one value has one
 * spelling.
 */
export function decodeBase64Url(text: string): Uint8Array | null {
  if (!STRICT.test(text) || text.length % 4 === 1) return null
  const bytes = Buffer.from(text, 'base64url')
  if (bytes.toString('base64url') !== text) return null
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength)
}
