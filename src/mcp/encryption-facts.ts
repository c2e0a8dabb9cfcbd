/**
 * What relay_whoami tells a model about end-to-end encryption. The bridge sends and reads plaintext
 * today: message bodies are visible to whoever operates the relay. When the client gains encryption,
 * this is the one place that reports it (whether bodies to and from this agent are encrypted, the
 * agent's encryption key, what a recipient without one gets), so the model can decide what to send.
 */
import { z } from 'zod'
import type { Bridge } from './bridge.ts'

export const EncryptionFacts = z.object({
  end_to_end: z.boolean().describe('true when message bodies are encrypted for the recipient before they leave this machine'),
  note: z.string(),
})

export function encryptionFacts(_bridge: Bridge): z.output<typeof EncryptionFacts> {
  return {
    end_to_end: false,
    note: 'Messages are not end-to-end encrypted by this bridge: the relay operator can read bodies. Do not send secrets.',
  }
}
