import type { PollQuery, ReceivedMessageJson, ReceivedPageJson } from '../../client/index.ts'
import { table } from '../format.ts'
import { UsageError, type CommandSpec } from './command.ts'
import { NO_RETRY_FLAG, retryingClient } from './send.ts'
import { messagePreview, shortKey } from './show.ts'

const STATUSES = ['sent', 'delivered', 'expired']
const KEY = /^[A-Za-z0-9_-]{43}$/
/** Between polls of --follow when the inbox was empty; a full page is followed at once. */
const DEFAULT_INTERVAL_S = 2

export const poll: CommandSpec = {
  name: 'poll',
  maxArgs: 0,
  summary: 'read your inbox, oldest first (new messages become delivered)',
  description:
    'Without --status, returns messages not yet delivered and marks them delivered. --follow keeps polling\n' +
    'and prints each message as one JSON line as it arrives, until interrupted. End-to-end encrypted\n' +
    'messages are decrypted (🔒 in the table; "encryption" in JSON, with the reason when one does not open).',
  flags: [
    { name: 'status', value: 'STATUS', help: 'sent (default), delivered or expired' },
    { name: 'from', value: 'KEY', help: 'only messages from this sender' },
    { name: 'thread', value: 'ID', help: 'only this thread' },
    { name: 'limit', value: 'N', help: 'messages per poll, 1–100 (default 50)' },
    { name: 'cursor', value: 'CURSOR', help: 'continue from a next_cursor printed before (delivered and expired)' },
    { name: 'follow', help: 'keep polling; print each message as a JSON line' },
    { name: 'interval', value: 'SECONDS', help: `pause between polls of --follow when nothing came (default ${DEFAULT_INTERVAL_S})` },
    NO_RETRY_FLAG,
  ],
  async run(ctx) {
    const f = ctx.flags
    const query: PollQuery = {}
    if (f.status !== undefined) {
      if (!STATUSES.includes(f.status)) throw new UsageError('--status must be sent, delivered or expired')
      query.status = f.status as PollQuery['status']
    }
    if (f.from !== undefined) {
      if (!KEY.test(f.from)) throw new UsageError('--from must be a public key: 43 base64url characters')
      query.sender_key = f.from
    }
    if (f.thread !== undefined) query.thread_id = f.thread
    if (f.cursor !== undefined) query.cursor = f.cursor
    if (f.limit !== undefined) {
      const n = Number(f.limit)
      if (!Number.isInteger(n) || n < 1 || n > 100) throw new UsageError('--limit must be an integer 1–100')
      query.limit = n
    }
    const client = retryingClient(ctx)
    if (f.follow !== 'true') {
      const page = await client.poll(query)
      if (ctx.json) return ctx.out.json(page)
      printTable(ctx.out.text, page.messages, client.publicKey)
      if (page.has_more) {
        const status = query.status ?? 'sent'
        ctx.out.note(status === 'sent' ? 'more are waiting: run relay poll again\n' : `more: relay poll --status ${status} --cursor ${page.next_cursor}\n`)
      }
      return
    }
    if ((query.status ?? 'sent') !== 'sent') throw new UsageError('--follow reads new messages only: leave out --status or use --status sent')
    const interval = f.interval === undefined ? DEFAULT_INTERVAL_S : Number(f.interval)
    if (!Number.isFinite(interval) || interval < 0.1 || interval > 3600) throw new UsageError('--interval must be 0.1–3600 seconds')
    for (;;) {
      const page: ReceivedPageJson = await client.poll(query)
      for (const m of page.messages) ctx.out.text(JSON.stringify(m) + '\n')
      if (!page.has_more) await Bun.sleep(interval * 1000)
    }
  },
}

function printTable(write: (s: string) => void, messages: ReceivedMessageJson[], me: string): void {
  if (messages.length === 0) return write('no messages\n')
  write(
    table(
      ['created', 'from', 'status', 'message', 'attachments', 'body'],
      messages.map((m) => [m.created_at, shortKey(m.sender_key, me), m.status, m.message_id, m.attachments?.length ? String(m.attachments.length) : '', messagePreview(m)]),
    ),
  )
}
