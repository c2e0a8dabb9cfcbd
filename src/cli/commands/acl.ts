import { readJson } from '../../client/index.ts'
import { fields, table } from '../format.ts'
import { UsageError, type CommandSpec } from './command.ts'

interface AclEntry {
  id: number
  owner_key: string
  peer_key: string
  entry_type: 'allow' | 'block'
  created_at: string
  updated_at?: string
}

const TYPES = ['allow', 'block']
const aclPath = (me: string, peer?: string) => `/v1/agents/${me}/acl${peer === undefined ? '' : `/${encodeURIComponent(peer)}`}`

const printEntry = (e: AclEntry) =>
  fields([
    ['peer', e.peer_key],
    ['type', e.entry_type],
    ['created', e.created_at],
    ['updated', e.updated_at],
  ])

export const aclList: CommandSpec = {
  name: 'acl list',
  maxArgs: 0,
  summary: 'list your allow and block entries, newest first',
  flags: [{ name: 'type', value: 'allow|block', help: 'only entries of this type' }],
  async run(ctx) {
    const type = ctx.flags.type
    if (type !== undefined && !TYPES.includes(type)) throw new UsageError('--type must be allow or block')
    const client = ctx.client()
    const entries = await client.call<AclEntry[]>('GET', aclPath(client.publicKey), { entry_type: type })
    if (ctx.json) return ctx.out.json(entries)
    ctx.out.text(table(['peer', 'type', 'created'], entries.map((e) => [e.peer_key, e.entry_type, e.created_at])))
  },
}

export const aclGet: CommandSpec = {
  name: 'acl get',
  args: 'PEER_KEY',
  minArgs: 1,
  maxArgs: 1,
  summary: 'show your entry for one peer',
  async run(ctx) {
    const client = ctx.client()
    const entry = await client.call<AclEntry>('GET', aclPath(client.publicKey, ctx.args[0]))
    if (ctx.json) return ctx.out.json(entry)
    ctx.out.text(printEntry(entry))
  },
}

export const aclSet: CommandSpec = {
  name: 'acl set',
  args: 'PEER_KEY allow|block',
  minArgs: 2,
  maxArgs: 2,
  summary: 'allow or block a peer (your inbox policy decides which entries count)',
  description: 'allowlist inboxes accept only peers with an allow entry; blocklist inboxes refuse peers with a block entry.',
  async run(ctx) {
    const [peer, type] = ctx.args
    if (!TYPES.includes(type)) throw new UsageError('the entry type must be allow or block')
    const client = ctx.client()
    const res = await client.transport.send('PUT', aclPath(client.publicKey, peer), { entry_type: type })
    const entry = await readJson<AclEntry>(res)
    if (ctx.json) return ctx.out.json(entry)
    ctx.out.text(`${res.status === 201 ? 'created' : 'changed'}: ${entry.entry_type} ${entry.peer_key}\n`)
  },
}

export const aclDelete: CommandSpec = {
  name: 'acl delete',
  args: 'PEER_KEY',
  minArgs: 1,
  maxArgs: 1,
  summary: 'remove your entry for a peer',
  async run(ctx) {
    const client = ctx.client()
    await client.call('DELETE', aclPath(client.publicKey, ctx.args[0]))
    if (ctx.json) return ctx.out.json({ deleted: true, peer_key: ctx.args[0] })
    ctx.out.text(`deleted: ${ctx.args[0]}\n`)
  },
}

export const acl = [aclList, aclGet, aclSet, aclDelete]
