import { readFileSync } from 'node:fs'
import { encryptionDeclaration } from '../../crypto/declaration.ts'
import type { AgentJson, AgentPatchInput } from '../../client/index.ts'
import { UsageError, type CommandContext, type CommandSpec } from './command.ts'
import { printAgent } from './show.ts'

export const profileGet: CommandSpec = {
  name: 'profile get',
  args: '[KEY]',
  maxArgs: 1,
  summary: "show your profile, or another agent's by public key",
  async run(ctx) {
    const client = ctx.client()
    const key = ctx.args[0] ?? client.publicKey
    const agent = await client.call<AgentJson>('GET', `/v1/agents/${encodeURIComponent(key)}`)
    if (ctx.json) return ctx.out.json(agent)
    printAgent(ctx, agent)
  },
}

const VISIBILITY = ['public', 'private']
const INBOX = ['open', 'closed', 'allowlist', 'blocklist']

/** A flag value given inline, from a file (`@path`) or from standard input (`@-`). */
export async function inlineOrFile(value: string): Promise<string> {
  if (value === '@-') return await Bun.stdin.text()
  if (!value.startsWith('@')) return value
  try {
    return readFileSync(value.slice(1), 'utf8')
  } catch (err) {
    throw new UsageError(`cannot read ${value.slice(1)}: ${(err as Error).message}`)
  }
}

async function jsonFlag(ctx: CommandContext, name: string): Promise<unknown> {
  const text = await inlineOrFile(ctx.flags[name])
  try {
    return JSON.parse(text)
  } catch {
    throw new UsageError(`--${name} is not valid JSON`)
  }
}

export const profileSet: CommandSpec = {
  name: 'profile set',
  publishesDeclaration: false,
  maxArgs: 0,
  summary: 'change your profile: name, visibility, inbox policy, metadata, capabilities',
  description:
    'Only the fields you give change; each one replaces that field whole. --name "" clears the name.\n' +
    'JSON values may be given inline, as @FILE, or @- for standard input. --capabilities takes an array\n' +
    'of capabilities or an object with a "capabilities" array (what `relay profile get --json` prints).\n' +
    'Other commands publish "encryption" in your metadata the first time they run with a key on a relay\n' +
    'when it has none (remembered in KEYFILE.declared); --encryption off records that you do not read\n' +
    'encrypted messages, so it is not published again. RELAY_PUBLISH_ENCRYPTION=false turns publishing off.',
  flags: [
    { name: 'name', value: 'TEXT', help: 'display name (at most 256 characters; "" clears it)' },
    { name: 'visibility', value: 'public|private', help: 'public agents appear in discovery' },
    { name: 'inbox-policy', value: 'POLICY', help: 'open | closed | allowlist | blocklist' },
    { name: 'metadata', value: 'JSON', help: 'a JSON object (at most 16 KiB)' },
    { name: 'capabilities', value: 'JSON|@FILE', help: 'a JSON array of capabilities (at most 20)' },
    { name: 'encryption', value: 'accept|require|off', help: 'declare that you read end-to-end encrypted messages (require: refuse plaintext ones)' },
  ],
  async run(ctx) {
    const f = ctx.flags
    const patch: AgentPatchInput = {}
    if (f.name !== undefined) patch.display_name = f.name === '' ? null : f.name
    if (f.visibility !== undefined) {
      if (!VISIBILITY.includes(f.visibility)) throw new UsageError('--visibility must be public or private')
      patch.visibility = f.visibility as AgentPatchInput['visibility']
    }
    if (f['inbox-policy'] !== undefined) {
      if (!INBOX.includes(f['inbox-policy'])) throw new UsageError(`--inbox-policy must be one of ${INBOX.join(', ')}`)
      patch.inbox_policy = f['inbox-policy'] as AgentPatchInput['inbox_policy']
    }
    if (f.metadata !== undefined) {
      const metadata = await jsonFlag(ctx, 'metadata')
      if (!metadata || typeof metadata !== 'object' || Array.isArray(metadata)) throw new UsageError('--metadata must be a JSON object')
      patch.metadata = metadata as Record<string, unknown>
    }
    if (f.capabilities !== undefined) {
      const caps = await jsonFlag(ctx, 'capabilities')
      const list = Array.isArray(caps) ? caps : (caps as { capabilities?: unknown })?.capabilities
      if (!Array.isArray(list)) throw new UsageError('--capabilities must be a JSON array (or an object with a "capabilities" array)')
      patch.capabilities = list
    }
    const encryption = f.encryption
    if (encryption !== undefined && !['accept', 'require', 'off'].includes(encryption)) throw new UsageError('--encryption must be accept, require or off')
    if (Object.keys(patch).length === 0 && encryption === undefined) {
      throw new UsageError('nothing to change: give at least one of --name, --visibility, --inbox-policy, --metadata, --capabilities, --encryption')
    }
    const client = ctx.client()
    if (encryption !== undefined) {
      // metadata is replaced whole by a PATCH: start from what is there (or what --metadata gives)
      const base = patch.metadata ?? (await client.getAgent()).metadata ?? {}
      const { encryption: _old, ...rest } = base as Record<string, unknown>
      // off keeps an entry that declares nothing, so the client does not publish support again
      patch.metadata = { ...rest, encryption: encryption === 'off' ? { versions: [], require: false } : encryptionDeclaration(encryption === 'require') }
    }
    const agent = await client.call<AgentJson>('PATCH', `/v1/agents/${client.publicKey}`, undefined, patch)
    if (ctx.json) return ctx.out.json(agent)
    printAgent(ctx, agent)
  },
}
