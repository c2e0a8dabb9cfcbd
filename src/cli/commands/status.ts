import { fields } from '../format.ts'
import type { CommandSpec } from './command.ts'

export const status: CommandSpec = {
  name: 'status',
  args: 'MESSAGE_ID',
  minArgs: 1,
  maxArgs: 1,
  summary: 'show whether a message was delivered (sent, delivered or expired)',
  async run(ctx) {
    const s = await ctx
      .client()
      .call<{ message_id: string; status: string; created_at: string; expires_at: string; delivered_at?: string }>(
        'GET',
        `/v1/messages/${encodeURIComponent(ctx.args[0])}/status`,
      )
    if (ctx.json) return ctx.out.json(s)
    ctx.out.text(
      fields([
        ['message', s.message_id],
        ['status', s.status],
        ['created', s.created_at],
        ['expires', s.expires_at],
        ['delivered', s.delivered_at],
      ]),
    )
  },
}
