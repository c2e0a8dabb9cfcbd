/**
 * Wrapping an attachment's data-encryption key for its recipient: HPKE Auth mode for v2 (MRP's
 * `dek_enc` / `dek_ct`), Base mode for v3 (whose message signature then covers the wrapped key).
 */
import { DEK_BYTES, V2_DEK_AAD, V2_DEK_INFO, V3_DEK_AAD, V3_DEK_INFO, type EncryptionVersion } from './constants.ts'
import { fromBase64Url, toBase64Url } from './bytes.ts'
import { edPublicToX25519, edSeedToX25519 } from './ed-to-x.ts'
import { DecryptError } from './errors.ts'
import { open, seal } from './hpke.ts'
import type { AgentKeys, WrappedKeyFields } from './message.ts'
import type { CryptoPrimitives } from './primitives.ts'

export function newDek(p: CryptoPrimitives): Uint8Array {
  return p.randomBytes(DEK_BYTES)
}

export interface WrapKeyInput {
  version: EncryptionVersion
  dek: Uint8Array
  sender: AgentKeys
  recipientKey: string
}

export function wrapDek(p: CryptoPrimitives, input: WrapKeyInput): WrappedKeyFields {
  const recipient = fromBase64Url(input.recipientKey)
  if (!recipient || recipient.length !== 32) throw new Error("the recipient's key is not 32 bytes of base64url")
  const pkR = edPublicToX25519(recipient)
  const { enc, ct } =
    input.version === 2
      ? seal(p, pkR, V2_DEK_INFO, V2_DEK_AAD, input.dek, { senderSecretKey: edSeedToX25519(p, input.sender.seed), senderPublicKey: edPublicToX25519(fromBase64Url(input.sender.publicKey)!) })
      : seal(p, pkR, V3_DEK_INFO, V3_DEK_AAD, input.dek)
  return { dek_enc: toBase64Url(enc), dek_ct: toBase64Url(ct) }
}

export interface UnwrappedKey {
  dek: Uint8Array
  /** The wrapping: 2 (Auth mode: the sender is authenticated by it) or 3 (Base mode: by the message's signature). */
  version: EncryptionVersion
}

/**
 * Recovers the DEK of an attachment sent by `senderKey` to `recipient`. Tries the version the message
 * suggests first, then the other; a wrapped key that opens under neither is refused with a reason.
 */
export function unwrapDek(p: CryptoPrimitives, recipient: AgentKeys, senderKey: string, fields: { dek_enc?: string; dek_ct?: string }, prefer: EncryptionVersion = 3): UnwrappedKey {
  const enc = fromBase64Url(fields.dek_enc ?? '')
  const ct = fromBase64Url(fields.dek_ct ?? '')
  if (!enc || enc.length !== 32 || !ct || ct.length !== DEK_BYTES + 16) throw new DecryptError('malformed', 'dek_enc / dek_ct are not a wrapped 32-byte key')
  const skR = edSeedToX25519(p, recipient.seed)
  const pkR = edPublicToX25519(fromBase64Url(recipient.publicKey)!)
  for (const version of prefer === 3 ? ([3, 2] as const) : ([2, 3] as const)) {
    let dek: Uint8Array | null
    try {
      if (version === 3) dek = open(p, enc, skR, V3_DEK_INFO, V3_DEK_AAD, ct, { recipientPublicKey: pkR })
      else {
        const sender = fromBase64Url(senderKey)
        if (!sender || sender.length !== 32) throw new Error('bad sender key')
        dek = open(p, enc, skR, V2_DEK_INFO, V2_DEK_AAD, ct, { senderPublicKey: edPublicToX25519(sender), recipientPublicKey: pkR })
      }
    } catch {
      throw new DecryptError('bad_key', 'dek_enc or the sender key is not a usable X25519 key')
    }
    if (dek) return { dek, version }
  }
  throw new DecryptError('authentication_failed', 'the wrapped attachment key does not open: not for this key, not from this sender, or changed on the way')
}
