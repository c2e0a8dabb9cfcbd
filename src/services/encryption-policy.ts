/**
 * Inboxes that accept only end-to-end encrypted messages (docs/protocol.md §14):
 * the relay checks the *shape* of encryption — the envelope's content type, the body's fields, the
 * attachments' flags — and never anything it would need a key for.
 */
import { RelayError } from '../errors.ts'
import type { SendRequest } from './messages-input.ts'

/** The content type of an encrypted message (MRP's). */
export const ENCRYPTED_CONTENT_TYPE = 'application/x-m2m-encrypted'

/** The profile metadata key in which an agent declares what it reads: `{versions: [...], require: bool}`. */
export const ENCRYPTION_METADATA_KEY = 'encryption'

/** Whether an agent's metadata (JSON text as stored) asks for encrypted messages only. */
export function inboxRequiresEncryption(metadataText: string | null | undefined): boolean {
  // most profiles say nothing about encryption: skip parsing them on the send path
  if (!metadataText || !metadataText.includes(`"${ENCRYPTION_METADATA_KEY}"`)) return false
  try {
    const declared = (JSON.parse(metadataText) as Record<string, unknown>)[ENCRYPTION_METADATA_KEY]
    return !!declared && typeof declared === 'object' && (declared as Record<string, unknown>).require === true
  } catch {
    return false
  }
}

function refuse(why: string, who: 'relay' | 'recipient'): never {
  const whose = who === 'relay' ? 'This relay accepts' : 'The recipient accepts'
  throw new RelayError('encryption_required', `${whose} only end-to-end encrypted messages: ${why}`, { required_by: who })
}

/**
 * Refuses a send that is not encrypted in shape (docs/protocol.md §14.6): it must have a body, with
 * `content_type` application/x-m2m-encrypted and an object `{v, enc, ct}` (v an integer, enc and ct
 * strings), and every attachment must be `encrypted: true` with `dek_enc` and `dek_ct`. The body is
 * required even with attachments only: it is what proves who sent them (§14.5).
 */
export function assertEncryptedShape(req: SendRequest, who: 'relay' | 'recipient'): void {
  if (req.bodyText === null) refuse('the message needs an encrypted body, even with attachments only', who)
  if (req.contentType !== ENCRYPTED_CONTENT_TYPE) refuse(`content_type must be ${ENCRYPTED_CONTENT_TYPE}`, who)
  let body: unknown
  try {
    body = JSON.parse(req.bodyText)
  } catch {
    body = null
  }
  const b = body as Record<string, unknown> | null
  if (!b || typeof b !== 'object' || Array.isArray(b) || !Number.isInteger(b.v) || typeof b.enc !== 'string' || typeof b.ct !== 'string') {
    refuse('the body must be an encrypted envelope {v, enc, ct}', who)
  }
  req.attachments.forEach((a, i) => {
    if (a.encrypted !== true || !a.dek_enc || !a.dek_ct) refuse(`attachments[${i}] must be encrypted (encrypted: true, dek_enc, dek_ct)`, who)
  })
}
