/**
 * Server-side Ed25519 verification with the runtime's native (BoringSSL) verifier: about 10× the rate of
 * the pure-JS implementation on this hardware (bench/verify.ts prints both).
 */
import { createPublicKey, verify } from 'node:crypto'
import { hasCanonicalScalar, isCanonicalPointEncoding, isSmallOrderPoint } from './keys.ts'

const SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex')

/**
 * The checks made before any curve arithmetic: lengths, a canonical S (RFC 8032 §5.1.7), canonical
 * encodings of the public key and R (§5.1.3), and neither a small-order point (with one, forged signatures
 * verify for some messages).
 */
export function passesPrechecks(publicKey: Uint8Array, signature: Uint8Array): boolean {
  return (
    publicKey.length === 32 &&
    signature.length === 64 &&
    hasCanonicalScalar(signature) &&
    isCanonicalPointEncoding(publicKey) &&
    isCanonicalPointEncoding(signature.subarray(0, 32)) &&
    !isSmallOrderPoint(publicKey) &&
    !isSmallOrderPoint(signature.subarray(0, 32))
  )
}

/** Verifies a signature over a UTF-8 message, after `passesPrechecks`. */
export function verifyEd25519(publicKey: Uint8Array, message: string | Uint8Array, signature: Uint8Array): boolean {
  if (!passesPrechecks(publicKey, signature)) return false
  try {
    const key = createPublicKey({ key: Buffer.concat([SPKI_PREFIX, publicKey]), format: 'der', type: 'spki' })
    return verify(null, typeof message === 'string' ? Buffer.from(message) : message, key, signature)
  } catch {
    // a public key that is not a valid curve point
    return false
  }
}
