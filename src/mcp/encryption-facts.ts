/**
 * What relay_whoami tells a model about end-to-end encryption: that bodies and files are encrypted for
 * recipients that declare it (and whether this agent declares it, so others encrypt to it), and that
 * the relay still sees who writes to whom, when, and how much.
 */
import { z } from 'zod'
import { readEncryptionDeclaration, SUPPORTED_VERSIONS } from '../crypto/index.ts'
import type { Bridge } from './bridge.ts'

export const EncryptionFacts = z.object({
  end_to_end: z.boolean().describe('true when message bodies are encrypted for the recipient before they leave this machine'),
  versions: z.array(z.number().int()).describe('the encrypted formats this bridge reads and writes'),
  declared: z.boolean().describe('true when your profile says you read encrypted messages, so other agents encrypt what they send you'),
  required: z.boolean().describe('true when your profile asks the relay to refuse plaintext messages to you'),
  note: z.string(),
})

export function encryptionFacts(_bridge: Bridge, metadata: unknown): z.output<typeof EncryptionFacts> {
  const declaration = readEncryptionDeclaration(metadata)
  return {
    end_to_end: true,
    versions: [...SUPPORTED_VERSIONS],
    declared: declaration !== null && declaration.versions.length > 0,
    required: declaration?.require === true,
    note:
      'relay_send and relay_reply encrypt the body and uploaded files end to end when the recipient declares it reads encrypted ' +
      'messages (or when encrypt: true), so the relay operator cannot read them; to others they go in plaintext. Messages you ' +
      'receive encrypted come decrypted, with an "encryption" field (sender_verified, or the error when one does not open). ' +
      'The relay still sees who writes to whom, when, and sizes.',
  }
}
