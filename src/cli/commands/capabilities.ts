import { table } from '../format.ts'
import { UsageError, type CommandSpec } from './command.ts'

export const capabilities: CommandSpec = {
  name: 'capabilities',
  maxArgs: 0,
  summary: 'list the capability tags of public agents, most used first',
  flags: [
    { name: 'prefix', value: 'TEXT', help: 'only tags starting with TEXT' },
    { name: 'limit', value: 'N', help: 'at most N tags (1–1000, default 1000)' },
  ],
  async run(ctx) {
    const limit = ctx.flags.limit === undefined ? undefined : Number(ctx.flags.limit)
    if (limit !== undefined && (!Number.isInteger(limit) || limit < 1 || limit > 1000)) throw new UsageError('--limit must be an integer 1–1000')
    const res = await ctx.client().call<{ capabilities: { tag: string; agent_count: number }[] }>('GET', '/v1/capabilities', {
      prefix: ctx.flags.prefix,
      limit,
    })
    if (ctx.json) return ctx.out.json(res)
    ctx.out.text(table(['tag', 'agents'], res.capabilities.map((c) => [c.tag, c.agent_count])))
  },
}
