/**
 * WebSocket frames (docs/protocol.md §8): what a client may send, parsed without trusting anything, and the
 * frames the relay sends, serialized in one place.
 */
import { RelayError, type ErrorCode } from '../errors.ts'
import { JsonTextError, parseJsonText } from '../lib/json-text.ts'
import { isPlainObject } from '../services/validate.ts'

export type ClientFrame =
  | { type: 'auth'; public_key: string | null; timestamp: string | null; signature: string | null }
  | { type: 'ack'; message_id: string }
  | { type: 'send'; id: unknown; message: unknown }
  | { type: 'ping' }

/** WebSocket close codes the relay uses. */
export const CLOSE = {
  /** Graceful stop of the relay. */
  goingAway: 1001,
  /** Too many frames while authentication was still running. */
  policy: 1008,
  /** The relay could not read the agent's messages (its database failed): reconnect. */
  unavailable: 1011,
  /** A frame over the size allowed (2 MiB; before authentication, the auth frame limit). */
  tooBig: 1009,
  /** docs/protocol.md §8: authentication failed. */
  authFailed: 4001,
  /** The agent was suspended by the operator while connected. */
  suspended: 4003,
  /** The agent was deleted while connected. */
  deleted: 4004,
  /** docs/protocol.md §8: no auth frame within the auth window. */
  authTimeout: 4008,
} as const

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null)

/**
 * A client frame, or a RelayError `bad_request` naming what is wrong (binary data, malformed JSON,
 * not an object, unknown type, missing fields). Auth frames with missing fields parse (the
 * authenticator answers them with `unauthorized`).
 */
export function parseClientFrame(data: string | Uint8Array): ClientFrame {
  if (typeof data !== 'string') throw new RelayError('bad_request', 'Binary frames are not supported; send JSON text frames')
  let value: unknown
  try {
    // depth-limited, and remembers the text of `message.body` / `message.metadata` for a send
    value = parseJsonText(data)
  } catch (err) {
    const deep = err instanceof JsonTextError && err.kind === 'depth'
    throw new RelayError('bad_request', deep ? `Malformed frame: ${err.message}` : 'Malformed frame: expected a JSON object')
  }
  if (!isPlainObject(value)) throw new RelayError('bad_request', 'Malformed frame: expected a JSON object')
  switch (value.type) {
    case 'auth':
      return { type: 'auth', public_key: str(value.public_key), timestamp: str(value.timestamp), signature: str(value.signature) }
    case 'ack':
      if (typeof value.message_id !== 'string' || value.message_id === '') {
        throw new RelayError('bad_request', 'An ack frame needs a message_id string', { fields: { message_id: 'required string' } })
      }
      return { type: 'ack', message_id: value.message_id }
    case 'send':
      // `{type:"send", id, message:{…}}`, or the flat form MRP clients send, `{type:"send", id, recipient_key, body, …}`:
      // the frame itself is the message (its `type` and `id` are unknown fields there, and ignored)
      return { type: 'send', id: value.id ?? null, message: value.message === undefined ? value : value.message }
    case 'ping':
      return { type: 'ping' }
    default:
      throw new RelayError('bad_request', typeof value.type === 'string' ? `Unknown frame type "${value.type.slice(0, 64)}"` : 'A frame needs a type')
  }
}

export const frames = {
  authOk: (publicKey: string) => JSON.stringify({ type: 'auth_result', status: 'ok', public_key: publicKey }),
  authError: (code: ErrorCode, message: string) => JSON.stringify({ type: 'auth_result', status: 'error', error: { code, message } }),
  error: (code: ErrorCode, message: string, details: unknown = null) => JSON.stringify({ type: 'error', error: { code, message, details } }),
  pong: () => '{"type":"pong"}',
  sendOk: (id: unknown, result: Record<string, unknown>) => JSON.stringify({ type: 'send_result', id, ...result }),
  sendError: (id: unknown, code: ErrorCode, message: string, details: unknown) =>
    JSON.stringify({ type: 'send_result', id, error: { code, message, details: details ?? null } }),
  /** `message` is the Message resource already serialized (messageToJson, then stringifyJson). */
  message: (messageJson: string) => `{"type":"message","message":${messageJson}}`,
}
