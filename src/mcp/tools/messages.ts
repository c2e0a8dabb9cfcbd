/** Tools that send and read messages: send, reply, one message, a thread, a delivery status. */
import type { McpServer } from '@modelcontextprotocol/server'
import { z } from 'zod'
import type { SendMessageInput } from '../../client/index.ts'
import type { AttachmentSpec, Bridge } from '../bridge.ts'
import { Cursor, Message, MessageFields, MessageId, MessageStatusResult, PublicKey, SendResult } from '../schemas.ts'
import { READS, SENDS, defineTool } from '../tool.ts'

interface Fields {
  body?: unknown
  text?: string
  content_type?: string
  expires_in?: number
  metadata?: Record<string, unknown>
  attachments?: AttachmentSpec[]
  encrypt?: boolean
}

/** Builds and sends one message: local files are uploaded first, `text` is the body {"text": …}. */
async function sendMessage(bridge: Bridge, to: string, fields: Fields, extra: { thread_id?: string; in_reply_to?: string }) {
  if (fields.body !== undefined && fields.text !== undefined) throw new Error('give body or text, not both')
  const message: SendMessageInput = { recipient_key: to, ...extra }
  if (fields.text !== undefined) message.body = { text: fields.text }
  else if (fields.body !== undefined) message.body = fields.body
  if (fields.content_type !== undefined) message.content_type = fields.content_type
  if (fields.expires_in !== undefined) message.expires_in = fields.expires_in
  if (fields.metadata !== undefined) message.metadata = fields.metadata
  // the same rules as the command line's send: the recipient's declaration unless the call says otherwise,
  // and a plaintext send refused by an encrypted-only inbox made again encrypted, files included
  let files: Awaited<ReturnType<Bridge['attachments']>> = { input: [], sent: [] }
  const { result, version } = await bridge.client.encryption.sendWithFallback(to, { encrypt: fields.encrypt }, async (version) => {
    if (fields.attachments?.length) files = await bridge.attachments(fields.attachments, version ? { recipientKey: to, version } : undefined)
    // the version is decided here: encrypt false stops the client from looking again or retrying on its own
    return bridge.send({ ...message, ...(files.input.length ? { attachments: files.input } : {}), encrypt: version ?? false })
  })
  return { ...result, recipient_key: to, thread_id: extra.thread_id, in_reply_to: extra.in_reply_to, attachments: files.sent, encryption: version ? { version } : null }
}

export function registerMessageTools(server: McpServer, bridge: Bridge): void {
  defineTool(server, 'relay_send', {
    title: 'Send a message',
    description:
      'Sends a message to another agent by public key: a JSON body (or a text), and/or files. Attachments are blob ids or local file ' +
      'paths, which are uploaded first. The relay stores the message until the recipient takes it (at most expires_in seconds). ' +
      'To answer a message, relay_reply is simpler.',
    input: {
      to: PublicKey.describe("the recipient's public key"),
      ...MessageFields,
      thread_id: z.string().min(1).max(128).optional().describe('a conversation id of your choice; replies keep it'),
      in_reply_to: MessageId.optional().describe('the message this answers (joins its thread)'),
    },
    output: SendResult.shape,
    annotations: SENDS,
    run: async ({ to, thread_id, in_reply_to, ...fields }) => sendMessage(bridge, to, fields as Fields, { thread_id, in_reply_to }),
  })

  defineTool(server, 'relay_reply', {
    title: 'Reply to a message',
    description:
      'Answers a message: sent to the other party of that message, in its thread, with in_reply_to set to it. Replying does not ' +
      'acknowledge the message: call relay_ack once you are done with it.',
    input: { message_id: MessageId.describe('the message to answer'), ...MessageFields },
    output: SendResult.shape,
    annotations: SENDS,
    run: async ({ message_id, ...fields }) => {
      const original = await bridge.readMessage(message_id)
      const to = original.sender_key === bridge.publicKey ? original.recipient_key : original.sender_key
      return sendMessage(bridge, to, fields as Fields, { thread_id: original.thread_id ?? undefined, in_reply_to: message_id })
    },
  })

  defineTool(server, 'relay_get_message', {
    title: 'One message',
    description:
      'A message you sent or received, by id, with its body and attachments. A received message still pending stays pending ' +
      '(read from the inbox): only relay_ack removes it.',
    input: { message_id: MessageId },
    output: { message: Message },
    annotations: READS,
    run: async ({ message_id }) => ({ message: await bridge.readMessage(message_id) }),
  })

  defineTool(server, 'relay_thread', {
    title: 'A conversation',
    description: 'The messages of a thread that you sent or received, oldest first, a page at a time. Changes no message status.',
    input: {
      thread_id: z.string().min(1).max(128),
      limit: z.number().int().min(1).max(100).optional().describe('page size (default 50)'),
      cursor: Cursor.optional(),
    },
    output: { messages: z.array(Message), has_more: z.boolean(), next_cursor: z.string().nullable() },
    annotations: READS,
    run: async ({ thread_id, ...page }) => ({ ...(await bridge.client.thread(thread_id, page)) }),
  })

  defineTool(server, 'relay_message_status', {
    title: 'Was it delivered?',
    description: 'Whether a message you sent (or received) is sent (waiting), delivered (taken by the recipient) or expired.',
    input: { message_id: MessageId },
    output: MessageStatusResult.shape,
    annotations: READS,
    run: async ({ message_id }) => ({ ...(await bridge.client.messageStatus(message_id)) }),
  })
}
