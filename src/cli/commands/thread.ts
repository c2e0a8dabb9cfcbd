import { table } from '../format.ts'
import type { CommandSpec } from './command.ts'
import type { ReceivedMessageJson } from '../../client/index.ts'
import { messagePreview, pages, shortKey } from './show.ts'
import { pageFlags, pageQuery } from './paging.ts'

export const thread: CommandSpec = {
  name: 'thread',
  args: 'THREAD_ID',
  minArgs: 1,
  maxArgs: 1,
  summary: 'list the messages of a thread that you sent or received, oldest first',
  description: 'Does not change any message status. End-to-end encrypted messages are decrypted (🔒).',
  flags: pageFlags(100),
  async run(ctx) {
    const client = ctx.client()
    const { all, limit, cursor } = pageQuery(ctx, 100)
    const got = await pages<{ messages: ReceivedMessageJson[] }>(
      all,
      (c) => client.thread(ctx.args[0], { limit, cursor: c }),
      cursor,
    )
    const messages = got.flatMap((p) => p.messages)
    const last = got[got.length - 1]
    if (ctx.json) return ctx.out.json({ messages, has_more: last.has_more, next_cursor: last.next_cursor })
    const me = client.publicKey
    ctx.out.text(
      table(
        ['created', 'from', 'to', 'status', 'message', 'body'],
        messages.map((m) => [m.created_at, shortKey(m.sender_key, me), shortKey(m.recipient_key, me), m.status, m.message_id, messagePreview(m)]),
      ),
    )
    if (last.has_more) ctx.out.note(`more: relay thread ${ctx.args[0]} --cursor ${last.next_cursor}\n`)
  },
}
