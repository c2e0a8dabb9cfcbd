/**
 * The attachment format of docs/protocol.md §14.5 written a second time from the text alone with
 * WebCrypto (HKDF-SHA256, AES-256-GCM) — none of src/crypto — both the writer and the reader, so tests
 * can show that the relay's own clients read what another implementation writes and write what it reads.
 */
const FORMAT = 0x01
const SALT_BYTES = 16
const SEGMENT_BYTES = 65536
const TAG_BYTES = 16
const INFO = new TextEncoder().encode('agent-relay e2e attachment v1')

async function payloadKey(dek: Uint8Array, salt: Uint8Array, usage: 'encrypt' | 'decrypt'): Promise<CryptoKey> {
  const ikm = await crypto.subtle.importKey('raw', dek.slice(), 'HKDF', false, ['deriveKey'])
  return crypto.subtle.deriveKey({ name: 'HKDF', hash: 'SHA-256', salt: salt.slice(), info: INFO }, ikm, { name: 'AES-GCM', length: 256 }, false, [usage])
}

/** nonce_i: the segment number as 11 bytes big-endian, then 0x01 for the last segment, 0x00 otherwise. */
function nonce(index: number, last: boolean): Uint8Array<ArrayBuffer> {
  const iv = new Uint8Array(12)
  new DataView(iv.buffer).setBigUint64(3, BigInt(index))
  iv[11] = last ? 1 : 0
  return iv
}

/** The stored bytes of `plaintext` under `dek`: 0x01 ‖ salt ‖ the AES-256-GCM segments. */
export async function writeEncryptedBlob(dek: Uint8Array, plaintext: Uint8Array): Promise<Uint8Array> {
  const salt = crypto.getRandomValues(new Uint8Array(SALT_BYTES))
  const key = await payloadKey(dek, salt, 'encrypt')
  const parts: Uint8Array[] = [Uint8Array.of(FORMAT), salt]
  const count = Math.max(1, Math.ceil(plaintext.length / SEGMENT_BYTES))
  for (let i = 0; i < count; i++) {
    const segment = plaintext.slice(i * SEGMENT_BYTES, (i + 1) * SEGMENT_BYTES)
    parts.push(new Uint8Array(await crypto.subtle.encrypt({ name: 'AES-GCM', iv: nonce(i, i === count - 1) }, key, segment)))
  }
  return new Uint8Array(Buffer.concat(parts))
}

/** The plaintext of stored bytes under `dek`; throws if the format, a tag or the segmentation is wrong. */
export async function readEncryptedBlob(dek: Uint8Array, stored: Uint8Array): Promise<Uint8Array> {
  if (stored.length < 1 + SALT_BYTES + TAG_BYTES || stored[0] !== FORMAT) throw new Error('not an attachment of format 0x01')
  const key = await payloadKey(dek, stored.subarray(1, 1 + SALT_BYTES), 'decrypt')
  const body = stored.subarray(1 + SALT_BYTES)
  const parts: Uint8Array[] = []
  const cipherSegment = SEGMENT_BYTES + TAG_BYTES
  const count = Math.max(1, Math.ceil(body.length / cipherSegment))
  for (let i = 0; i < count; i++) {
    const segment = body.slice(i * cipherSegment, (i + 1) * cipherSegment)
    // AES-GCM refuses a segment under the wrong nonce: a cut or reordered stream throws here
    parts.push(new Uint8Array(await crypto.subtle.decrypt({ name: 'AES-GCM', iv: nonce(i, i === count - 1) }, key, segment)))
  }
  return new Uint8Array(Buffer.concat(parts))
}
