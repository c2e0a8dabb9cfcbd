/**
 * The console's identity: an Ed25519 key pair made or imported in this browser (WebCrypto), never sent
 * anywhere. The browser keeps the private key as a non-extractable CryptoKey in IndexedDB: pages can
 * have it sign, but no script — the console's own included — can read its bytes back. The key file
 * (`{"public_key", "private_key"}`, the format of `relay keygen`) exists only in memory, right after a
 * key is generated, imported or moved from an older console's localStorage, for the one export the
 * console offers then.
 *
 * End-to-end encryption needs the X25519 private key that the Ed25519 seed converts to (SHA-512 of the
 * seed, clamped). The seed is in memory only when a key is made or imported, so that is when the X25519
 * key is derived and kept beside the signing key, as a non-extractable CryptoKey that can only
 * deriveBits (the Diffie-Hellman step). A key stored before the console encrypted has no X25519 half: it
 * signs as before, and the console says that importing its key file again enables decryption.
 */

import { KEY_FILE_FORMATS } from '../../auth/key-file-formats.ts'

/** Where consoles before this one kept the key file, in clear; moved to IndexedDB once, then deleted. */
const LEGACY_STORAGE_KEY = 'agent-relay-console.key'
const DB_NAME = 'agent-relay-console'
const STORE = 'keys'
const SLOT = 'current'

export interface Identity {
  publicKey: string
  /** The private key as a non-extractable CryptoKey for signing. */
  signingKey: CryptoKey
  /** The X25519 private key converted from the same seed, non-extractable, for deriveBits; absent for a key stored before the console encrypted. */
  agreementKey?: CryptoKey
  /** The key file text, held only until the user has exported it or declined to; never stored. */
  file?: string
  /** How this identity came to be, for the export offer: made here, imported from a file, moved from localStorage, or loaded from IndexedDB. */
  origin: 'generated' | 'imported' | 'migrated' | 'stored'
}

/** What IndexedDB holds: the CryptoKey object itself (structured clone keeps it non-extractable). */
interface StoredKey {
  public_key: string
  signing_key: CryptoKey
  /** Absent in records written before the console encrypted. */
  agreement_key?: CryptoKey
  saved_at: string
}

export function b64url(bytes: ArrayBuffer | Uint8Array): string {
  const u8 = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes)
  let s = ''
  for (const b of u8) s += String.fromCharCode(b)
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')
}

export function fromB64url(text: string): Uint8Array {
  const s = atob(text.replace(/-/g, '+').replace(/_/g, '/'))
  return Uint8Array.from(s, (c) => c.charCodeAt(0))
}

const KEY_RE = /^[A-Za-z0-9_-]{43}$/

const fromHex = (hex: string) => Uint8Array.from(hex.match(/../g) ?? [], (h) => parseInt(h, 16))

/** The 32 or 64 bytes of text in base64 or base64url, padded or not; null for any other text. */
function fromBase64Any(text: string): Uint8Array | null {
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(text)) return null
  const unpadded = text.replace(/=+$/, '').replace(/\+/g, '-').replace(/\//g, '_')
  if (unpadded.length % 4 === 1) return null
  const bytes = fromB64url(unpadded)
  return b64url(bytes) === unpadded && (bytes.length === 32 || bytes.length === 64) ? bytes : null
}

/**
 * The seed a key file holds, and the public key it states if it states one, in every format `--key`
 * reads (KEY_FILE_FORMATS): relay keygen's JSON, the raw 32-byte seed of MRP tools (mrp-sdk's
 * Keypair.save), the 64-byte seed + public key, the seed in hex or base64/base64url.
 */
function readKeyFile(content: string | Uint8Array): { seed: Uint8Array; stated?: string; halves?: boolean } {
  if (typeof content !== 'string') {
    if (content.length === 32) return { seed: content }
    const printable = content.every((b) => (b >= 0x20 && b <= 0x7e) || b === 0x09 || b === 0x0a || b === 0x0d)
    if (content.length === 64 && !printable) return { seed: content.slice(0, 32), stated: b64url(content.slice(32)), halves: true }
    content = new TextDecoder().decode(content)
  }
  const text = content.trim()
  if (text.startsWith('{')) {
    let parsed: { public_key?: unknown; private_key?: unknown }
    try {
      parsed = JSON.parse(text)
    } catch {
      throw new Error('The key file looks like JSON but does not parse')
    }
    const d = parsed.private_key
    if (typeof d !== 'string' || !KEY_RE.test(d)) throw new Error('The key file has no private_key (base64url of 32 bytes)')
    return { seed: fromB64url(d), stated: typeof parsed.public_key === 'string' ? parsed.public_key : undefined }
  }
  if (/^[0-9a-fA-F]{64}$/.test(text)) return { seed: fromHex(text) }
  const bytes = /^[0-9a-fA-F]{128}$/.test(text) ? fromHex(text) : fromBase64Any(text)
  if (bytes?.length === 32) return { seed: bytes }
  if (bytes?.length === 64) return { seed: bytes.slice(0, 32), stated: b64url(bytes.slice(32)), halves: true }
  throw new Error(`Not a key this console can read; a key file holds one of: ${KEY_FILE_FORMATS}`)
}

/** Makes an Identity from a key file (its bytes, or pasted text); throws with a readable message when it is not one. */
export async function identityFromFile(content: string | Uint8Array): Promise<Identity> {
  const { seed, stated, halves } = readKeyFile(content)
  const d = b64url(seed)
  const pkcs8 = new Uint8Array([0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20, ...seed])
  // extractable once, to derive the public key from the seed (a JWK export carries it as x)
  const probe = await crypto.subtle.importKey('pkcs8', pkcs8, { name: 'Ed25519' }, true, ['sign'])
  const jwk = await crypto.subtle.exportKey('jwk', probe)
  const publicKey = jwk.x as string
  if (stated !== undefined && stated !== publicKey) {
    throw new Error(halves ? 'The key file holds 64 bytes, but its second half is not the public key of its first (seed + public key)' : 'The key file public_key does not match its private_key')
  }
  const signingKey = await crypto.subtle.importKey('pkcs8', pkcs8, { name: 'Ed25519' }, false, ['sign'])
  const agreementKey = await agreementKeyFromSeed(seed)
  const file = JSON.stringify({ public_key: publicKey, private_key: d }, null, 2) + '\n'
  return { publicKey, signingKey, agreementKey, file, origin: 'imported' }
}

/**
 * The X25519 private key of an Ed25519 seed (RFC 8032's secret scalar: the first half of SHA-512(seed),
 * clamped; what libsodium's crypto_sign_ed25519_sk_to_curve25519 returns), imported non-extractable.
 */
async function agreementKeyFromSeed(seed: Uint8Array): Promise<CryptoKey> {
  const scalar = new Uint8Array(await crypto.subtle.digest('SHA-512', seed as Uint8Array<ArrayBuffer>)).slice(0, 32)
  scalar[0]! &= 248
  scalar[31]! &= 127
  scalar[31]! |= 64
  const pkcs8 = new Uint8Array([0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x6e, 0x04, 0x22, 0x04, 0x20, ...scalar])
  scalar.fill(0)
  try {
    return await crypto.subtle.importKey('pkcs8', pkcs8, { name: 'X25519' }, false, ['deriveBits'])
  } finally {
    pkcs8.fill(0)
  }
}

/** A new key pair, made by WebCrypto in this browser. */
export async function generateIdentity(): Promise<Identity> {
  const pair = (await crypto.subtle.generateKey({ name: 'Ed25519' }, true, ['sign', 'verify'])) as CryptoKeyPair
  const jwk = await crypto.subtle.exportKey('jwk', pair.privateKey)
  return { ...(await identityFromFile(JSON.stringify({ public_key: jwk.x, private_key: jwk.d }))), origin: 'generated' }
}

function openDb(): Promise<IDBDatabase> {
  return new Promise((resolve, reject) => {
    const req = indexedDB.open(DB_NAME, 1)
    req.onupgradeneeded = () => req.result.createObjectStore(STORE)
    req.onsuccess = () => resolve(req.result)
    req.onerror = () => reject(req.error)
  })
}

/** One request in its own transaction, resolved once the transaction has committed. */
async function inStore<T>(mode: IDBTransactionMode, run: (store: IDBObjectStore) => IDBRequest<T>): Promise<T> {
  const db = await openDb()
  try {
    return await new Promise<T>((resolve, reject) => {
      const tx = db.transaction(STORE, mode)
      const req = run(tx.objectStore(STORE))
      tx.oncomplete = () => resolve(req.result)
      tx.onerror = () => reject(tx.error ?? req.error)
      tx.onabort = () => reject(tx.error ?? new Error('IndexedDB transaction aborted'))
    })
  } finally {
    db.close()
  }
}

/** Keeps the key in this browser: the non-extractable CryptoKey only, never the key file. */
export async function saveIdentity(id: Identity): Promise<void> {
  if (id.signingKey.extractable || id.agreementKey?.extractable) throw new Error('refusing to store an extractable key')
  const record: StoredKey = { public_key: id.publicKey, signing_key: id.signingKey, saved_at: new Date().toISOString() }
  if (id.agreementKey) record.agreement_key = id.agreementKey
  await inStore('readwrite', (s) => s.put(record, SLOT))
}

/**
 * The key kept in this browser, or null. A key file left in localStorage by an earlier console is
 * moved once: stored as a non-extractable key, then deleted from localStorage (the identity returned
 * still carries its file, so that the console can offer one export).
 */
export async function loadIdentity(): Promise<Identity | null> {
  const legacy = localStorage.getItem(LEGACY_STORAGE_KEY)
  if (legacy) {
    try {
      const id = await identityFromFile(legacy)
      await saveIdentity(id)
      localStorage.removeItem(LEGACY_STORAGE_KEY)
      return { ...id, origin: 'migrated' }
    } catch {
      // not a key file: leave it where it is, the user may still export it by hand
    }
  }
  const stored = await inStore<StoredKey | undefined>('readonly', (s) => s.get(SLOT))
  if (!stored || !(stored.signing_key instanceof CryptoKey)) return null
  const agreementKey = stored.agreement_key instanceof CryptoKey ? stored.agreement_key : undefined
  return { publicKey: stored.public_key, signingKey: stored.signing_key, agreementKey, origin: 'stored' }
}

/** Deletes the key from this browser (IndexedDB, and localStorage should an old copy remain). */
export async function forgetIdentity(): Promise<void> {
  localStorage.removeItem(LEGACY_STORAGE_KEY)
  await inStore('readwrite', (s) => s.delete(SLOT))
}

/** Ed25519 signature of UTF-8 text, unpadded base64url. */
export async function signText(id: Identity, text: string): Promise<string> {
  return b64url(await crypto.subtle.sign({ name: 'Ed25519' }, id.signingKey, new TextEncoder().encode(text)))
}

/** SHA-256 of the bytes, unpadded base64url: BODY_HASH of the canonical string. */
export async function bodyHash(bytes: Uint8Array<ArrayBuffer> | ArrayBuffer): Promise<string> {
  return b64url(await crypto.subtle.digest('SHA-256', bytes))
}
