/**
 * Which encrypted attachments a recipient may open (docs/protocol.md §14.5): a data-encryption key is
 * used only when something proves that the message's sender wrapped it. Either the message's encrypted
 * body opened with its sender verified — v2 (HPKE Auth mode) proves the sender itself, v3 by a signature
 * that must cover this attachment's wrapped key — or, with no encrypted body, the key is wrapped in HPKE
 * Auth mode (v2, MRP's attachment-only messages). A key wrapped in Base mode that no signature covers
 * could have been wrapped by anyone, the relay included, and is refused as `unauthenticated`.
 */
import { ENCRYPTED_CONTENT_TYPE } from './constants.ts'
import { unwrapDek, type UnwrappedKey } from './dek.ts'
import { DecryptError } from './errors.ts'
import type { AgentKeys } from './message.ts'
import type { CryptoPrimitives } from './primitives.ts'

/** A received message as its recipient holds it after opening it (or trying to). */
export interface AttachmentContext {
  sender_key: string
  /** Still application/x-m2m-encrypted when the body was never opened. */
  content_type?: string
  attachments?: readonly { encrypted?: boolean; dek_enc?: string; dek_ct?: string }[]
  /** What opening the encrypted body gave: its facts, or the error; absent when there was no encrypted body. */
  encryption?: { version: number; sender_verified: boolean; error?: { reason: string; message: string } }
}

/** The DEK of `attachment` of `message`, or DecryptError when the sender is not proved to have wrapped it. */
export function unwrapAttachmentKey(p: CryptoPrimitives, recipient: AgentKeys, message: AttachmentContext, attachment: { dek_enc?: string; dek_ct?: string }): UnwrappedKey {
  const refuse = (why: string) => new DecryptError('unauthenticated', `the attachment is not opened: ${why}`)
  const facts = message.encryption
  if (facts?.error) throw refuse(`the message's encrypted body did not open (${facts.error.reason}), so nothing proves who wrapped its key`)
  if (!facts) {
    if (message.content_type === ENCRYPTED_CONTENT_TYPE) throw refuse("the message's encrypted body has not been opened")
    // no envelope: only HPKE Auth mode says who wrapped the key
    const key = unwrapDek(p, recipient, message.sender_key, attachment, 2)
    if (key.version !== 2) throw refuse('its key is wrapped in HPKE Base mode and the message has no signed body to vouch for it')
    return key
  }
  if (!facts.sender_verified) throw refuse('the message is not verified as written by its sender')
  if (facts.version === 2) {
    // v2 signs nothing about its attachments: the wrapping itself must authenticate the sender
    const key = unwrapDek(p, recipient, message.sender_key, attachment, 2)
    if (key.version !== 2) throw refuse('its key is wrapped in HPKE Base mode, which a v2 message does not sign')
    return key
  }
  if (facts.version !== 3) throw new DecryptError('unsupported_version', `encryption version ${facts.version} is not supported (2 and 3 are)`)
  // opening a v3 body checked that these attachments' wrapped keys are the signed ones
  const signed = (message.attachments ?? []).some((a) => (a.encrypted || a.dek_enc || a.dek_ct) && a.dek_enc === attachment.dek_enc && a.dek_ct === attachment.dek_ct)
  if (!signed || !attachment.dek_enc || !attachment.dek_ct) throw refuse("its wrapped key is not among those the sender's signature covers")
  return unwrapDek(p, recipient, message.sender_key, attachment, 3)
}
