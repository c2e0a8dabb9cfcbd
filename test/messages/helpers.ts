/** Helpers shared by the message tests. */
import { generateKeyPair } from '../../src/auth/sign.ts'
import type { RelayClient, SendMessageInput } from '../../src/client/index.ts'
import type { TestRelay } from '../support/harness.ts'

/** Rate limits off: for tests that send or poll more than a minute's allowance. */
export const UNLIMITED = { rateLimits: { sendPerMin: 0, pollPerMin: 0 } }

/** A key that has never talked to the relay. */
export const unknownKey = (): string => generateKeyPair().publicKey

/** A client whose agent exists (one authenticated request made). */
export async function agent(t: TestRelay, profile?: Parameters<RelayClient['updateProfile']>[0]): Promise<RelayClient> {
  const c = t.client()
  if (profile) await c.updateProfile(profile)
  else await c.getAgent()
  return c
}

/** POST /v1/messages returning the raw Response (status and headers). */
export function rawSend(c: RelayClient, body: unknown): Promise<Response> {
  return c.transport.send('POST', '/v1/messages', body)
}

/** GET with a raw query string, returning the raw Response. */
export function rawGet(c: RelayClient, pathWithQuery: string): Promise<Response> {
  return c.transport.send('GET', pathWithQuery)
}

export function msg(to: RelayClient | string, extra: Partial<SendMessageInput> = {}): SendMessageInput {
  return { recipient_key: typeof to === 'string' ? to : to.publicKey, body: { text: 'hello' }, ...extra }
}

export const MESSAGE_ID = /^msg_\d+_[0-9a-f]{12}$/
export const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
