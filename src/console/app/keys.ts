/**
 * The console's identity: an Ed25519 key pair made or imported in this browser (WebCrypto), kept in
 * localStorage in the key-file format of `relay keygen` ({"public_key", "private_key"}), never sent
 * anywhere. Export writes that file; forget removes it from the browser.
 */

const STORAGE_KEY = 'agent-relay-console.key'

export interface Identity {
  publicKey: string
  /** The private key as a non-extractable CryptoKey for signing. */
  signingKey: CryptoKey
  /** The key file text (what export saves). */
  file: string
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

/** Makes an Identity from key-file text; throws with a readable message when it is not one. */
export async function identityFromFile(text: string): Promise<Identity> {
  let parsed: { public_key?: unknown; private_key?: unknown }
  try {
    parsed = JSON.parse(text)
  } catch {
    throw new Error('The key file is not JSON')
  }
  const d = parsed.private_key
  if (typeof d !== 'string' || !KEY_RE.test(d)) throw new Error('The key file has no private_key (base64url of 32 bytes)')
  const pkcs8 = new Uint8Array([0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20, ...fromB64url(d)])
  // extractable once, to derive the public key from the seed (a JWK export carries it as x)
  const probe = await crypto.subtle.importKey('pkcs8', pkcs8, { name: 'Ed25519' }, true, ['sign'])
  const jwk = await crypto.subtle.exportKey('jwk', probe)
  const publicKey = jwk.x as string
  if (typeof parsed.public_key === 'string' && parsed.public_key !== publicKey) throw new Error('The key file public_key does not match its private_key')
  const signingKey = await crypto.subtle.importKey('pkcs8', pkcs8, { name: 'Ed25519' }, false, ['sign'])
  const file = JSON.stringify({ public_key: publicKey, private_key: d }, null, 2) + '\n'
  return { publicKey, signingKey, file }
}

/** A new key pair, made by WebCrypto in this browser. */
export async function generateIdentity(): Promise<Identity> {
  const pair = (await crypto.subtle.generateKey({ name: 'Ed25519' }, true, ['sign', 'verify'])) as CryptoKeyPair
  const jwk = await crypto.subtle.exportKey('jwk', pair.privateKey)
  return identityFromFile(JSON.stringify({ public_key: jwk.x, private_key: jwk.d }))
}

export function saveIdentity(id: Identity): void {
  localStorage.setItem(STORAGE_KEY, id.file)
}

export async function loadIdentity(): Promise<Identity | null> {
  const text = localStorage.getItem(STORAGE_KEY)
  if (!text) return null
  try {
    return await identityFromFile(text)
  } catch {
    return null
  }
}

export function forgetIdentity(): void {
  localStorage.removeItem(STORAGE_KEY)
}

/** Ed25519 signature of UTF-8 text, unpadded base64url. */
export async function signText(id: Identity, text: string): Promise<string> {
  return b64url(await crypto.subtle.sign({ name: 'Ed25519' }, id.signingKey, new TextEncoder().encode(text)))
}

/** SHA-256 of the bytes, unpadded base64url: BODY_HASH of the canonical string. */
export async function bodyHash(bytes: Uint8Array<ArrayBuffer> | ArrayBuffer): Promise<string> {
  return b64url(await crypto.subtle.digest('SHA-256', bytes))
}
