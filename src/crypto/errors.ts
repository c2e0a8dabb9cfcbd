/**
 * Why an encrypted message or attachment could not be opened. Every failure of the formats is one of
 * these reasons, so callers can show "not for you" apart from "tampered" without parsing text.
 */
export type DecryptFailureReason =
  /** The body is not an encrypted envelope of a known shape. */
  | 'malformed'
  /** `v` names a version this code does not read. */
  | 'unsupported_version'
  /** A key (sender's or ours) cannot be converted or used. */
  | 'bad_key'
  /** The AEAD tag did not verify: wrong recipient, wrong sender (v2), or changed bytes. */
  | 'authentication_failed'
  /** v3: the signature inside does not verify, or names other keys than the envelope. */
  | 'bad_signature'
  /** An attachment's bytes are cut short, too long, or out of order. */
  | 'truncated'
  /** An attachment whose wrapped key nothing proves the sender made (no signature covers it, no Auth mode). */
  | 'unauthenticated'

export class DecryptError extends Error {
  constructor(
    readonly reason: DecryptFailureReason,
    message: string,
  ) {
    super(message)
    this.name = 'DecryptError'
  }
}
