/**
 * The relay as MCP resources: the inbox digest (relay://inbox), one message, one thread, one agent.
 * Hosts that subscribe to relay://inbox get notifications/resources/updated when a message arrives —
 * a hint to look, never the message itself: the inbox, and the relay behind it, hold the truth.
 */
import { ResourceTemplate, type McpServer, type ReadResourceResult } from '@modelcontextprotocol/server'
import type { MessageJson } from '../client/index.ts'
import type { Bridge } from './bridge.ts'

export const INBOX_URI = 'relay://inbox'
/** Messages listed in the digest; relay_inbox pages through all of them. */
const DIGEST_MESSAGES = 50
const PREVIEW_CHARS = 200

const json = (uri: URL | string, value: unknown): ReadResourceResult => ({
  contents: [{ uri: String(uri), mimeType: 'application/json', text: JSON.stringify(value, null, 2) }],
})

/** The start of a body, as text, so the digest stays small whatever the messages hold. */
export function preview(body: unknown): string | undefined {
  if (body === undefined) return undefined
  const text = typeof body === 'object' && body !== null && typeof (body as { text?: unknown }).text === 'string' ? (body as { text: string }).text : JSON.stringify(body)
  return text.length > PREVIEW_CHARS ? `${text.slice(0, PREVIEW_CHARS)}…` : text
}

export function inboxDigest(bridge: Bridge) {
  const all = bridge.inbox.list({ limit: Number.MAX_SAFE_INTEGER }).messages
  const bySender = new Map<string, number>()
  for (const m of all) bySender.set(m.sender_key, (bySender.get(m.sender_key) ?? 0) + 1)
  return {
    pending_count: all.length,
    oldest_at: all[0]?.created_at ?? null,
    newest_at: all[all.length - 1]?.created_at ?? null,
    senders: [...bySender].map(([sender_key, count]) => ({ sender_key, count })).sort((a, b) => b.count - a.count),
    messages: all.slice(0, DIGEST_MESSAGES).map((m: MessageJson) => ({
      message_id: m.message_id,
      sender_key: m.sender_key,
      created_at: m.created_at,
      thread_id: m.thread_id,
      in_reply_to: m.in_reply_to,
      attachments: m.attachments?.length ?? 0,
      preview: preview(m.body),
    })),
    connection: bridge.inbox.status(),
  }
}

const one = (value: string | string[]) => (Array.isArray(value) ? value[0] : value)

export function registerResources(server: McpServer, bridge: Bridge): void {
  server.registerResource(
    'inbox',
    INBOX_URI,
    {
      title: 'Inbox',
      description: 'Messages received and not yet acknowledged: how many, from whom, and a preview of the oldest. Subscribe to hear when one arrives.',
      mimeType: 'application/json',
    },
    async (uri) => {
      await bridge.inbox.whenSynced()
      return json(uri, inboxDigest(bridge))
    },
  )
  server.registerResource(
    'message',
    new ResourceTemplate('relay://message/{id}', { list: undefined }),
    { title: 'Message', description: 'One message you sent or received (reading it does not acknowledge it)', mimeType: 'application/json' },
    async (uri, { id }) => json(uri, await bridge.readMessage(one(id))),
  )
  server.registerResource(
    'thread',
    new ResourceTemplate('relay://thread/{id}', { list: undefined }),
    { title: 'Thread', description: 'The first 100 messages of a thread you take part in, oldest first', mimeType: 'application/json' },
    async (uri, { id }) => json(uri, await bridge.client.thread(one(id), { limit: 100 })),
  )
  server.registerResource(
    'agent',
    new ResourceTemplate('relay://agent/{key}', { list: undefined }),
    { title: 'Agent', description: "An agent's profile and capabilities, by public key", mimeType: 'application/json' },
    async (uri, { key }) => json(uri, await bridge.client.getAgent(one(key))),
  )
}
