/**
 * End-to-end encryption in the browser (docs/protocol.md §14; docs/console.md
 * explains the choices): the message and key-wrapping formats of src/crypto, run on the pure primitives
 * (@noble, bundled here), with the two operations that need this agent's private key done by WebCrypto
 * on the non-extractable keys of keys.ts — X25519 deriveBits for every Diffie-Hellman with our static
 * key, Ed25519 sign for the signature inside a v3 message. Attachment bytes go through WebCrypto's
 * AES-256-GCM (attachment-cipher.ts).
 *
 * The format code is synchronous and asks for a seed; WebCrypto is asynchronous and never shows the key.
 * So the format code is handed a stand-in seed that only the primitives below recognise: when it asks
 * them for a DH or a signature with that seed, they answer from values WebCrypto computed beforehand, or
 * note what is missing and fail; the missing values are then computed and the (deterministic) step run
 * again. The DHs a step needs are known from the message and computed up front, so a step usually runs
 * once; a v3 seal runs twice (the bytes to sign are only known inside it).
 */
import { bindEncryption, DecryptError, ENCRYPTED_CONTENT_TYPE, ENCRYPTION_METADATA_KEY, encryptionDeclaration, isEncryptedMessage, readEncryptionDeclaration, type AgentKeys, type Encryption, type EncryptionDeclaration, type EncryptionVersion } from '../../crypto/index.ts'
import { edPublicToX25519 } from '../../crypto/ed-to-x.ts'
import { fromBase64Url } from '../../crypto/bytes.ts'
import type { CryptoPrimitives } from '../../crypto/primitives.ts'
import { purePrimitives } from '../../crypto/pure.ts'
import { ApiError, call } from './api.ts'
import { openFile, sealFile } from './attachment-cipher.ts'
import type { Identity } from './keys.ts'

export { ENCRYPTED_CONTENT_TYPE, isEncryptedMessage }

/** What the console shows of a message's encryption (the client's `encryption` field, plus the sender's view). */
export interface Lock {
  version: number
  sender_verified: boolean
  signer_key?: string
  /** Sent by this agent: encrypted for the recipient, which only the recipient can read. */
  outgoing?: boolean
  error?: { reason: string; message: string }
}

/** The stand-in seed, and the X25519 scalar the format code derives from it (random per page). */
const STAND_IN_SEED = new Uint8Array(32)
const STAND_IN_SCALAR = (() => {
  const s = crypto.getRandomValues(new Uint8Array(32))
  s[0]! &= 248
  s[31]! &= 127
  s[31]! |= 64
  return s
})()

const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('')
const sameBytes = (a: Uint8Array, b: Uint8Array) => a.length === b.length && a.every((x, i) => x === b[i])
const FAILED = new Uint8Array(0)

/** WebCrypto's answers for one step: DH results by peer public key, signatures by message. */
class KeyWork {
  readonly dh = new Map<string, Uint8Array>()
  readonly signatures = new Map<string, Uint8Array>()
  missingDh: Uint8Array[] = []
  missingSignatures: Uint8Array[] = []

  constructor(private readonly id: Identity) {}

  primitives(): CryptoPrimitives {
    const work = this
    const ours = edPublicToX25519(fromBase64Url(this.id.publicKey)!)
    return {
      ...purePrimitives,
      name: 'webcrypto+pure',
      sha512: (data) => (data === STAND_IN_SEED ? new Uint8Array([...STAND_IN_SCALAR, ...new Uint8Array(32)]) : purePrimitives.sha512(data)),
      x25519PublicKey: (sk) => (sameBytes(sk, STAND_IN_SCALAR) ? ours.slice() : purePrimitives.x25519PublicKey(sk)),
      x25519(sk, pk) {
        if (!sameBytes(sk, STAND_IN_SCALAR)) return purePrimitives.x25519(sk, pk)
        const shared = work.dh.get(hex(pk))
        if (shared === FAILED) throw new Error('X25519 failed (invalid or small-order public key)')
        if (shared) return shared.slice()
        work.missingDh.push(pk.slice())
        throw new Error('X25519 with the stored key: not computed yet')
      },
      ed25519Sign(seed, message) {
        if (seed !== STAND_IN_SEED) return purePrimitives.ed25519Sign(seed, message)
        const sig = work.signatures.get(hex(message))
        if (sig) return sig
        work.missingSignatures.push(message.slice())
        throw new Error('Ed25519 with the stored key: not signed yet')
      },
    }
  }

  async computeDh(peers: Uint8Array[]): Promise<void> {
    const key = this.id.agreementKey
    if (!key) throw new DecryptError('bad_key', NO_AGREEMENT_KEY)
    await Promise.all(
      peers
        .filter((pk) => !this.dh.has(hex(pk)))
        .map(async (pk) => {
          try {
            const pub = await crypto.subtle.importKey('raw', pk as Uint8Array<ArrayBuffer>, { name: 'X25519' }, false, [])
            this.dh.set(hex(pk), new Uint8Array(await crypto.subtle.deriveBits({ name: 'X25519', public: pub }, key, 256)))
          } catch {
            // a small-order point or not a key: the format code reports it as a bad key
            this.dh.set(hex(pk), FAILED)
          }
        }),
    )
  }

  async sign(messages: Uint8Array[]): Promise<void> {
    for (const m of messages) {
      this.signatures.set(hex(m), new Uint8Array(await crypto.subtle.sign({ name: 'Ed25519' }, this.id.signingKey, m as Uint8Array<ArrayBuffer>)))
    }
  }
}

export const NO_AGREEMENT_KEY = 'This key was kept by an earlier console, which stored only its signing half. Import its key file again (Forget, then Import) to read and send encrypted messages.'

/** The X25519 form of an Ed25519 public key in base64url, or null when it has none. */
function xKey(edKey: string | undefined): Uint8Array | null {
  const bytes = edKey ? fromBase64Url(edKey) : null
  if (!bytes || bytes.length !== 32) return null
  try {
    return edPublicToX25519(bytes)
  } catch {
    return null
  }
}

/**
 * Runs a step of the format code with our key: DH with `peers` computed first, anything else the
 * step turns out to need computed on demand and the step run again.
 */
async function withKey<T>(id: Identity, peers: (Uint8Array | null)[], step: (e2e: Encryption, me: AgentKeys) => T): Promise<T> {
  const work = new KeyWork(id)
  await work.computeDh(peers.filter((p): p is Uint8Array => p !== null))
  const me: AgentKeys = { seed: STAND_IN_SEED, publicKey: id.publicKey }
  for (let round = 0; ; round++) {
    work.missingDh = []
    work.missingSignatures = []
    const e2e = bindEncryption(work.primitives())
    try {
      return step(e2e, me)
    } catch (err) {
      if (round > 3 || (!work.missingDh.length && !work.missingSignatures.length)) throw err
      await work.computeDh(work.missingDh)
      await work.sign(work.missingSignatures)
    }
  }
}

/**
 * A received (or sent) message as the console shows it: an encrypted one opened, with `lock` saying
 * how; one that does not open keeps its envelope, with `lock.error` and the reason. Never throws.
 * The envelope as stored stays in `envelope` (the "what this relay can see" view shows it).
 */
export async function openForDisplay(id: Identity, m: any): Promise<any> {
  if (!isEncryptedMessage(m)) return m
  const v = typeof m.body?.v === 'number' ? m.body.v : 0
  const shown = { ...m, envelope: { content_type: m.content_type, body: m.body } }
  if (m.recipient_key !== id.publicKey) {
    // our own message to someone else: sealed to their key, which only they hold
    return { ...shown, lock: { version: v, sender_verified: true, outgoing: true } satisfies Lock }
  }
  if (!id.agreementKey) return { ...shown, lock: { version: v, sender_verified: false, error: { reason: 'no_key', message: NO_AGREEMENT_KEY } } satisfies Lock }
  const enc = typeof m.body?.enc === 'string' ? fromBase64Url(m.body.enc) : null
  try {
    const opened = await withKey(id, [enc && enc.length === 32 ? enc : null, v === 2 ? xKey(m.sender_key) : null], (e2e, me) => e2e.openMessage(me, m))
    return { ...shown, content_type: opened.content_type, body: opened.body, lock: opened.encryption satisfies Lock }
  } catch (err) {
    const e = err instanceof DecryptError ? err : new DecryptError('malformed', (err as Error).message)
    return { ...shown, lock: { version: v, sender_verified: false, error: { reason: e.reason, message: e.message } } satisfies Lock }
  }
}

/** The wire message with its body sealed for the recipient (`attachments` already carry their wrapped keys). */
export async function sealForSend(id: Identity, message: Record<string, any>, version: EncryptionVersion): Promise<Record<string, any>> {
  if (!id.agreementKey) throw new Error(NO_AGREEMENT_KEY)
  // a message with no body is sealed too, as a JSON null: the envelope proves who sent its encrypted attachments
  const bodyless = message.body === undefined || message.body === null
  const encrypted = ((message.attachments ?? []) as any[]).filter((a) => a.encrypted)
  // one clock reading for every run of the step: the bytes signed must be the same each time
  const now = new Date()
  const sealed = await withKey(id, [version === 2 ? xKey(message.recipient_key) : null], (e2e, me) =>
    e2e.sealMessage({
      version,
      sender: me,
      recipientKey: message.recipient_key,
      // null is JSON; under another type it would come back as the text "null"
      contentType: bodyless ? 'application/json' : (message.content_type ?? 'application/json'),
      body: bodyless ? null : message.body,
      attachments: encrypted.map((a) => ({ dek_enc: a.dek_enc, dek_ct: a.dek_ct })),
      now,
    }),
  )
  return { ...message, content_type: sealed.content_type, body: sealed.body }
}

/**
 * A file encrypted for `recipientKey` under a fresh key (on WebCrypto, attachment-cipher.ts), with the
 * SHA-256 its upload signs and that key wrapped for the attachment entry; `progress` gets plaintext bytes.
 */
export async function encryptFile(
  id: Identity,
  file: Blob,
  recipientKey: string,
  version: EncryptionVersion,
  progress?: (plainBytes: number) => void,
): Promise<{ ciphertext: Blob; sha256: Uint8Array; dek_enc: string; dek_ct: string }> {
  if (!id.agreementKey) throw new Error(NO_AGREEMENT_KEY)
  const dek = bindEncryption(purePrimitives).newDek()
  try {
    const wrapped = await withKey(id, [version === 2 ? xKey(recipientKey) : null], (keyed, me) => keyed.wrapDek({ version, dek, sender: me, recipientKey }))
    const sealed = await sealFile(dek, file, progress)
    return { ciphertext: sealed.body, sha256: sealed.sha256, ...wrapped }
  } finally {
    dek.fill(0)
  }
}

/**
 * The plaintext of an encrypted attachment of `m` (as openForDisplay returned it; its stored bytes in
 * `ciphertext`); rejects with DecryptError — `unauthenticated` when nothing proves the sender wrapped
 * its key (the client's rule, docs/protocol.md §14.5).
 */
export async function decryptAttachment(id: Identity, m: any, attachment: { dek_enc?: string; dek_ct?: string }, ciphertext: Blob): Promise<Blob> {
  if (!id.agreementKey) throw new DecryptError('bad_key', NO_AGREEMENT_KEY)
  const enc = attachment.dek_enc ? fromBase64Url(attachment.dek_enc) : null
  // the facts of opening the body (or its error); an envelope never opened keeps its encrypted content type
  const context = { sender_key: m.sender_key, content_type: m.content_type, attachments: m.attachments, encryption: m.lock?.outgoing ? undefined : m.lock }
  const { dek } = await withKey(id, [enc && enc.length === 32 ? enc : null, xKey(m.sender_key)], (e2e, me) => e2e.attachmentKey(me, context, attachment))
  try {
    return await openFile(dek, ciphertext)
  } finally {
    dek.fill(0)
  }
}

const DECLARATION_TTL_MS = 5 * 60_000
const declarations = new Map<string, { at: number; declaration: EncryptionDeclaration | null }>()

/** What `key` declares in its profile (read at most every five minutes); null when nothing or not readable. */
export async function declarationOf(id: Identity, key: string): Promise<EncryptionDeclaration | null> {
  const hit = declarations.get(key)
  if (hit && Date.now() - hit.at < DECLARATION_TTL_MS) return hit.declaration
  let declaration: EncryptionDeclaration | null = null
  try {
    declaration = readEncryptionDeclaration((await call(id, 'GET', `/v1/agents/${encodeURIComponent(key)}`))?.metadata)
  } catch (err) {
    if (!(err instanceof ApiError) || (err.status !== 404 && err.status !== 403)) throw err
  }
  declarations.set(key, { at: Date.now(), declaration })
  return declaration
}

/** The client's rule: v3 when the recipient declares it, v2 when it declares only that, else plaintext (null) unless `force`. */
export async function versionFor(id: Identity, recipientKey: string, force = false): Promise<EncryptionVersion | null> {
  const declared = await declarationOf(id, recipientKey)
  if (declared) return declared.versions.includes(3) ? 3 : declared.versions.includes(2) ? 2 : 3
  return force ? 2 : null
}

export function forgetDeclaration(key: string): void {
  declarations.delete(key)
}

/**
 * Publishes in this agent's profile that it reads encrypted messages, the first time a key that can
 * decrypt is used here (a declaration already there — require included — is left as it is).
 * Resolves true when it published one.
 */
export async function declareSupport(id: Identity, profile: { metadata?: Record<string, unknown> | null } | null): Promise<boolean> {
  if (!id.agreementKey || !profile || readEncryptionDeclaration(profile.metadata)) return false
  const metadata = { ...(profile.metadata ?? {}), [ENCRYPTION_METADATA_KEY]: encryptionDeclaration(false) }
  await call(id, 'PATCH', `/v1/agents/${id.publicKey}`, { metadata })
  forgetDeclaration(id.publicKey)
  return true
}
