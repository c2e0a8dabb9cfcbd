/**
 * The command-line client publishes `metadata.encryption` on its agent's profile the first time it
 * runs with a key on a relay (docs/protocol.md §14.6), and remembers having done so in a small text
 * file beside the key file — `relay.key.declared`, one line per relay address and public key — so later commands
 * make no extra request. Without the file (deleted, or a folder it cannot write to) a command reads
 * the profile once more and leaves it alone when it has an `encryption` entry of any shape.
 */
import { appendFileSync, readFileSync } from 'node:fs'
import type { DeclarationMemory } from '../client/index.ts'

export function declarationMarkerPath(keyFile: string): string {
  return `${keyFile}.declared`
}

export function declarationMarker(keyFile: string): DeclarationMemory {
  const path = declarationMarkerPath(keyFile)
  const lines = (): string[] => {
    try {
      return readFileSync(path, 'utf8').split('\n')
    } catch {
      return []
    }
  }
  // one key may be used on several relays, and a key file may be replaced by a new key
  return {
    has: (relayUrl, publicKey) => lines().includes(`${relayUrl} ${publicKey}`),
    remember: (relayUrl, publicKey) => appendFileSync(path, `${relayUrl} ${publicKey}\n`, { mode: 0o600 }),
  }
}
