/**
 * The inner plaintext of a v3 message (docs/protocol.md §14.4) written and read a second time from the
 * text alone, with node:crypto for SHA-256 and Ed25519 — none of src/crypto — so tests can build inner
 * plaintexts the project's reader must accept or refuse, and check the layout the project writes.
 * Seal and open them with sealBase/openBase of independent-hpke.ts and V3_MESSAGE_INFO.
 */
import { createHash, createPrivateKey, createPublicKey, sign, verify } from 'node:crypto'
import { unb64u, type EdKeys } from './independent-hpke.ts'

export const V3_MESSAGE_INFO = new TextEncoder().encode('agent-relay e2e v3 message')
const SIGNATURE_CONTEXT = new TextEncoder().encode('agent-relay e2e v3 signature\0')
const sha256 = (bytes: Uint8Array) => new Uint8Array(createHash('sha256').update(bytes).digest())
/** A big-endian unsigned integer of 2, 4 or 8 bytes. */
function be(value: number, bytes: 2 | 4 | 8): Buffer {
  const out = Buffer.alloc(bytes)
  if (bytes === 8) out.writeBigUInt64BE(BigInt(value))
  else out.writeUIntBE(value, 0, bytes)
  return out
}

/** What a v3 sender signs and lays out, besides its key. */
export interface V3Content {
  recipientKey: string
  contentType: string
  body: Uint8Array
  createdMs: number
  /** SHA-256 over the attachments' wrapped keys; SHA-256 of nothing by default. */
  attachmentsDigest?: Uint8Array
}

function signedBytes(senderKey: Uint8Array, c: V3Content): Uint8Array {
  const ctype = new TextEncoder().encode(c.contentType)
  const digest = c.attachmentsDigest ?? sha256(new Uint8Array(0))
  return Buffer.concat([SIGNATURE_CONTEXT, senderKey, unb64u(c.recipientKey), be(ctype.length, 2), ctype, sha256(c.body), be(c.createdMs, 8), digest])
}

/** The inner plaintext P, signed by `sender` and zero-padded to `paddedLength` bytes (at least the bytes used). */
export function v3Inner(sender: EdKeys, c: V3Content, paddedLength: number): Uint8Array {
  const senderKey = unb64u(sender.publicKey)
  const pkcs8 = Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), sender.seed])
  const signature = sign(null, signedBytes(senderKey, c), createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' }))
  const ctype = new TextEncoder().encode(c.contentType)
  const used = Buffer.concat([Uint8Array.of(0x03), senderKey, be(c.createdMs, 8), c.attachmentsDigest ?? sha256(new Uint8Array(0)), be(ctype.length, 2), ctype, be(c.body.length, 4), c.body, signature])
  if (paddedLength < used.length) throw new Error(`padded length ${paddedLength} is below the ${used.length} bytes used`)
  const inner = new Uint8Array(paddedLength)
  inner.set(used)
  return inner
}

/** The bytes used by the fields of a v3 plaintext, before padding: 79 + n + m + 64. */
export const v3UsedBytes = (contentTypeBytes: number, bodyBytes: number) => 79 + contentTypeBytes + bodyBytes + 64

export interface V3Read {
  senderKey: Uint8Array
  createdMs: number
  contentType: string
  body: Uint8Array
  /** Where the zero padding starts. */
  paddingAt: number
  /** Whether the signature verifies for `recipientKey`. */
  verifies(recipientKey: string, attachmentsDigest?: Uint8Array): boolean
}

/** Reads the fields of an inner plaintext by the table of §14.4 (no checks: the caller asserts). */
export function readV3Inner(inner: Uint8Array): V3Read {
  const buf = Buffer.from(inner)
  const senderKey = inner.slice(1, 33)
  const createdMs = Number(buf.readBigUInt64BE(33))
  const n = buf.readUInt16BE(73)
  const contentType = new TextDecoder().decode(inner.subarray(75, 75 + n))
  const m = buf.readUInt32BE(75 + n)
  const body = inner.slice(79 + n, 79 + n + m)
  const signature = inner.slice(79 + n + m, 143 + n + m)
  const spki = Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), senderKey])
  return {
    senderKey,
    createdMs,
    contentType,
    body,
    paddingAt: 143 + n + m,
    verifies: (recipientKey, attachmentsDigest) =>
      verify(null, signedBytes(senderKey, { recipientKey, contentType, body, createdMs, attachmentsDigest }), createPublicKey({ key: spki, format: 'der', type: 'spki' }), signature),
  }
}
