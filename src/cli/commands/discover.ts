import type { CapabilityJson } from '../../client/index.ts'
import { systemClock } from '../../lib/clock.ts'
import { table } from '../format.ts'
import type { CommandSpec } from './command.ts'
import { pageFlags, pageQuery } from './paging.ts'
import { pages } from './show.ts'

interface DiscoveryEntry {
  public_key: string
  display_name?: string
  last_active_at: string
  capabilities: CapabilityJson[]
}

export const discover: CommandSpec = {
  name: 'discover',
  maxArgs: 0,
  summary: 'find public agents by capability tag, text, name or recent activity',
  description: 'With no filter, every public agent, most recently active first. Several --tag flags must all match.',
  flags: [
    { name: 'tag', value: 'TAG', help: 'capability tag (repeatable; commas allowed: --tag a,b)', repeatable: true },
    { name: 'q', value: 'TEXT', help: 'words matched as prefixes in capability names, descriptions and display names' },
    { name: 'name', value: 'TEXT', help: 'part of the display name' },
    { name: 'active-since', value: 'TIME', help: 'RFC 3339 time, or a duration ago such as 1h or 7d' },
    ...pageFlags(100),
  ],
  async run(ctx) {
    const tags = (ctx.lists.tag ?? []).flatMap((t) => t.split(',')).map((t) => t.trim()).filter(Boolean)
    let activeSince = ctx.flags['active-since']
    const ago = activeSince && /^(\d+)(m|h|d)$/.exec(activeSince)
    if (ago) activeSince = new Date(systemClock.now() - Number(ago[1]) * { m: 60_000, h: 3_600_000, d: 86_400_000 }[ago[2] as 'm' | 'h' | 'd']).toISOString()
    const { all, limit, cursor } = pageQuery(ctx, 100)
    const client = ctx.client()
    const got = await pages<{ agents: DiscoveryEntry[] }>(
      all,
      (c) => client.call('GET', '/v1/discover', { tag: tags.length ? tags : undefined, q: ctx.flags.q, name: ctx.flags.name, active_since: activeSince, limit, cursor: c }),
      cursor,
    )
    const agents = got.flatMap((p) => p.agents)
    const last = got[got.length - 1]
    if (ctx.json) return ctx.out.json({ agents, has_more: last.has_more, next_cursor: last.next_cursor })
    ctx.out.text(
      table(
        ['public key', 'name', 'last active', 'capabilities'],
        agents.map((a) => [a.public_key, a.display_name, a.last_active_at, a.capabilities.map((c) => c.name).join(', ')]),
      ),
    )
    if (last.has_more) ctx.out.note(`more: add --cursor ${last.next_cursor}\n`)
  },
}
