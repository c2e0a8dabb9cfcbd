import type { CommandSpec } from './command.ts'
import { UsageError } from './command.ts'

/** `relay agent delete --yes`: the agent of your key file, and everything the relay keeps for it. */
export const agentDelete: CommandSpec = {
  name: 'agent delete',
  publishesDeclaration: false,
  maxArgs: 0,
  summary: 'delete your agent and its data from the relay (asks for --yes)',
  description:
    'Removes your profile, capabilities, ACL entries, webhook (and its pending deliveries), the messages\n' +
    'addressed to you and your blobs that no other agent\'s message still needs, and closes your WebSockets.\n' +
    'Messages you sent to others stay until they expire. Your key file is kept: the next signed request\n' +
    'with it creates a fresh, empty agent. A suspended agent cannot be deleted.',
  flags: [{ name: 'yes', help: 'confirm: really delete (required)' }],
  async run(ctx) {
    const client = ctx.client()
    if (ctx.flags.yes !== 'true') throw new UsageError(`this deletes agent ${client.publicKey} and its data on ${ctx.relayUrl}; add --yes to confirm`)
    await client.deleteAgent()
    if (ctx.json) return ctx.out.json({ deleted: client.publicKey })
    ctx.out.text(`deleted ${client.publicKey}\n`)
  },
}
