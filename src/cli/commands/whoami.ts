import type { AgentJson } from '../../client/index.ts'
import type { CommandSpec } from './command.ts'
import { printAgent } from './show.ts'

export const whoami: CommandSpec = {
  name: 'whoami',
  summary: 'show your public key and your profile on the relay',
  description: 'Reads the key file and asks the relay for your profile (the first signed request creates your agent).',
  maxArgs: 0,
  async run(ctx) {
    const client = ctx.client()
    const agent = await client.call<AgentJson>('GET', `/v1/agents/${client.publicKey}`)
    if (ctx.json) return ctx.out.json({ public_key: client.publicKey, relay: ctx.relayUrl, key_file: ctx.keyFile, agent })
    ctx.out.text(`${client.publicKey}\n`)
    printAgent(ctx, agent, [
      ['relay', ctx.relayUrl],
      ['key file', ctx.keyFile],
    ])
  },
}
