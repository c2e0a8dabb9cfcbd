/**
 * The non-destructive inbox: list what was received and not yet acknowledged, acknowledge what has been
 * handled, and wait for a message. Reading never changes anything; relay_ack is the only way out.
 */
import type { McpServer } from '@modelcontextprotocol/server'
import { z } from 'zod'
import type { Bridge } from '../bridge.ts'
import { Connection, Cursor, Message, MessageId, PublicKey } from '../schemas.ts'
import { DESTROYS, READS, defineTool, type ToolExtra } from '../tool.ts'

/** relay_wait blocks at most this long: MCP hosts time calls out, and a model should get to act. */
export const MAX_WAIT_S = 300
const DEFAULT_WAIT_S = 30
/** Progress notifications while waiting keep hosts that reset their timeout on progress from giving up. */
const PROGRESS_EVERY_MS = 10_000

const Filter = {
  from: PublicKey.optional().describe('only messages from this sender'),
  thread_id: z.string().min(1).max(128).optional().describe('only this thread'),
  in_reply_to: MessageId.optional().describe('only replies to this message'),
}

export function registerInboxTools(server: McpServer, bridge: Bridge): void {
  defineTool(server, 'relay_inbox', {
    title: 'My inbox',
    description:
      'Messages received and not yet acknowledged, oldest first. Reading the inbox changes nothing: the same messages come back ' +
      'until you call relay_ack for them, even if the bridge restarts. Acknowledge each message once you have handled it.',
    input: { ...Filter, limit: z.number().int().min(1).max(100).optional().describe('page size (default 20)'), cursor: Cursor.optional() },
    output: {
      messages: z.array(Message),
      pending_count: z.number().int().describe('all pending messages, whatever the filter'),
      has_more: z.boolean(),
      next_cursor: z.string().nullable(),
      connection: Connection,
    },
    annotations: READS,
    run: async (query) => {
      await bridge.inbox.whenSynced()
      return { ...bridge.inbox.list(query), connection: bridge.inbox.status() }
    },
  })

  defineTool(server, 'relay_ack', {
    title: 'Acknowledge messages',
    description:
      'Marks messages as handled: they leave the inbox and become delivered on the relay (their senders can see it with ' +
      'relay_message_status). Acknowledging twice is harmless. Ids the relay does not know as messages to you come back in not_found.',
    input: { message_ids: z.array(MessageId).min(1).max(100) },
    output: {
      acked: z.array(z.string()),
      not_found: z.array(z.string()),
      failed: z.array(z.object({ message_id: z.string(), error: z.string() })).describe('not acknowledged: still pending, try again'),
      via: z.enum(['websocket', 'http']),
      pending_count: z.number().int(),
    },
    annotations: DESTROYS,
    run: async ({ message_ids }) => ({ ...(await bridge.inbox.ack(message_ids)) }),
  })

  defineTool(server, 'relay_wait', {
    title: 'Wait for a message',
    description:
      `Blocks until a matching message is in the inbox, or timeout_s passes (default ${DEFAULT_WAIT_S}, at most ${MAX_WAIT_S}); returns it ` +
      'without acknowledging it. A matching message already pending is returned at once, unless new_only. To wait for the answer ' +
      'to a message you sent, give in_reply_to with its id.',
    input: {
      ...Filter,
      timeout_s: z.number().min(0).max(MAX_WAIT_S).optional().describe(`seconds to wait (default ${DEFAULT_WAIT_S})`),
      new_only: z.boolean().optional().describe('ignore messages already pending; wait for one that arrives from now on'),
    },
    output: {
      message: Message.nullable().describe('null when the time ran out'),
      timed_out: z.boolean(),
      waited_s: z.number(),
      pending_count: z.number().int(),
      connection: Connection,
    },
    annotations: READS,
    run: async ({ timeout_s, new_only, ...filter }, extra) => {
      const started = Date.now()
      const stopProgress = reportProgress(extra, started)
      try {
        const message = await bridge.inbox.wait(filter, { timeoutMs: (timeout_s ?? DEFAULT_WAIT_S) * 1000, newOnly: new_only, signal: extra.mcpReq.signal })
        return {
          message,
          timed_out: message === null,
          waited_s: Math.round((Date.now() - started) / 100) / 10,
          pending_count: bridge.inbox.count,
          connection: bridge.inbox.status(),
        }
      } finally {
        stopProgress()
      }
    },
  })
}

/** notifications/progress every few seconds while waiting, when the caller asked for progress. */
function reportProgress(extra: ToolExtra, started: number): () => void {
  const token = extra.mcpReq._meta?.progressToken
  if (token === undefined) return () => {}
  const timer = setInterval(() => {
    const seconds = Math.round((Date.now() - started) / 1000)
    extra.mcpReq.notify({ method: 'notifications/progress', params: { progressToken: token, progress: seconds, message: `waiting for a message (${seconds} s)` } }).catch(() => {})
  }, PROGRESS_EVERY_MS)
  return () => clearInterval(timer)
}
