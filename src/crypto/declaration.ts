/**
 * How an agent says it reads encrypted messages: `metadata.encryption` on its profile, e.g.
 * `{"versions": [3, 2], "require": false}`. Profile metadata is what any agent allowed to read the
 * profile already fetches, needs no new endpoint or column, and the relay validates it as JSON like
 * any other metadata; the relay itself reads only `require` (to refuse plaintext sends).
 */
import { SUPPORTED_VERSIONS, type EncryptionVersion } from './constants.ts'

export const ENCRYPTION_METADATA_KEY = 'encryption'

export interface EncryptionDeclaration {
  /** Versions the agent reads, preferred first. */
  versions: EncryptionVersion[]
  /** True: the agent accepts only encrypted messages, and the relay refuses plaintext sends to it. */
  require: boolean
}

export function encryptionDeclaration(require = false): EncryptionDeclaration {
  return { versions: [...SUPPORTED_VERSIONS], require }
}

/** The declaration in an agent's metadata, or null when it declares none (or nothing usable). */
export function readEncryptionDeclaration(metadata: unknown): EncryptionDeclaration | null {
  if (!metadata || typeof metadata !== 'object') return null
  const d = (metadata as Record<string, unknown>)[ENCRYPTION_METADATA_KEY]
  if (!d || typeof d !== 'object' || Array.isArray(d)) return null
  const raw = (d as Record<string, unknown>).versions
  const versions = Array.isArray(raw) ? (raw.filter((v) => (SUPPORTED_VERSIONS as readonly unknown[]).includes(v)) as EncryptionVersion[]) : []
  const require = (d as Record<string, unknown>).require === true
  if (!versions.length && !require) return null
  return { versions, require }
}
