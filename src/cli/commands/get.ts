import type { CommandSpec } from './command.ts'
import { fields } from '../format.ts'
import { humanBytes } from '../format.ts'
import { encryptionNote } from './show.ts'

export interface MessageView {
  message_id: string
  sender_key: string
  recipient_key: string
  content_type: string
  body?: unknown
  attachments?: { blob_id: string; filename?: string; content_type?: string; size?: number; encrypted?: boolean }[]
  thread_id?: string
  in_reply_to?: string
  metadata?: Record<string, unknown>
  status: string
  created_at: string
  expires_at: string
  delivered_at?: string
}

export const get: CommandSpec = {
  name: 'get',
  args: 'MESSAGE_ID',
  minArgs: 1,
  maxArgs: 1,
  summary: 'show one message you sent or received',
  description: 'Reading a message addressed to you marks it delivered. An end-to-end encrypted message is decrypted;\n' +
    '"encryption" says so, or why it does not open (the body is then not printed, and the exit code is 1).\n' +
    'Download encrypted attachments with relay download --message.',
  async run(ctx) {
    const m = await ctx.client().getMessage(ctx.args[0])
    // a message that does not open: the envelope and the reason, no body, and a failing exit code
    const failed = m.encryption?.error
    const refuse = () => {
      throw new Error(`message ${m.message_id} was not decrypted: ${failed!.reason} — ${failed!.message}`)
    }
    if (ctx.json) {
      ctx.out.json(m)
      return failed ? refuse() : undefined
    }
    ctx.out.text(
      fields([
        ['message', m.message_id],
        ['from', m.sender_key],
        ['to', m.recipient_key],
        ['status', m.status],
        ['created', m.created_at],
        ['expires', m.expires_at],
        ['delivered', m.delivered_at],
        ['thread', m.thread_id],
        ['in reply to', m.in_reply_to],
        ['content type', m.content_type],
        ['encryption', encryptionNote(m)],
        ['metadata', m.metadata],
      ]),
    )
    for (const a of m.attachments ?? []) {
      ctx.out.text(`attachment  ${a.blob_id}  ${a.filename ?? '(no name)'}  ${a.content_type ?? ''}  ${a.size === undefined ? '' : humanBytes(a.size)}${a.encrypted ? '  encrypted' : ''}\n`)
    }
    if (failed) return refuse()
    if (m.body !== undefined) {
      ctx.out.text('\n' + (typeof m.body === 'string' ? m.body : JSON.stringify(m.body, null, 2)) + '\n')
    }
  },
}
