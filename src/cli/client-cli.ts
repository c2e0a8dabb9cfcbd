/**
 * The runner of the agent-side commands (docs/protocol.md §13 names the operator ones): global flags with
 * environment fallbacks, `--help` for every command, one client per run, and errors that show the
 * relay's code and request id.
 */
import { readFileSync, statSync } from 'node:fs'
import { resolve } from 'node:path'
import { DecryptError, RelayApiError, RelayClient, decodeKeyFile, type KeyPair } from '../client/index.ts'
import { relayPathHint } from '../client/transport.ts'
import { UsageError, parseArgs } from './args.ts'
import type { CommandContext, CommandSpec, FlagSpec } from './commands/command.ts'
import { CLIENT_COMMANDS } from './commands/index.ts'
import { declarationMarker } from './declaration-marker.ts'
import { errorLine } from './format.ts'

export const DEFAULT_RELAY_URL = 'http://127.0.0.1:8080'
export const DEFAULT_KEY_FILE = 'relay.key'

export const GLOBAL_FLAGS: FlagSpec[] = [
  { name: 'relay', value: 'URL', help: `relay address (env RELAY_URL, default ${DEFAULT_RELAY_URL})` },
  { name: 'key', value: 'FILE', help: `your key file: from relay keygen, or an MRP tool's seed (raw 32 bytes, hex or base64) (env RELAY_KEY_FILE, default ./${DEFAULT_KEY_FILE})` },
  { name: 'json', help: 'print JSON for scripts instead of text' },
  { name: 'help', help: 'show help for the command' },
]

export interface ClientIo {
  env: Record<string, string | undefined>
  cwd: string
  stdout: { write(s: string): unknown }
  stderr: { write(s: string): unknown; isTTY?: boolean; columns?: number }
}

/** The first word of every agent-side command, so main can route to this runner. */
export function isClientCommand(word: string): boolean {
  return CLIENT_COMMANDS.some((c) => c.name.split(' ')[0] === word)
}

/** The command named by the leading words of argv, or the group they start (`profile`, `acl`). */
function resolveCommand(argv: string[]): { spec?: CommandSpec; group: CommandSpec[]; words: number } {
  let best: CommandSpec | undefined
  for (const spec of CLIENT_COMMANDS) {
    const words = spec.name.split(' ')
    if (words.every((w, i) => argv[i] === w) && (!best || words.length > best.name.split(' ').length)) best = spec
  }
  const group = CLIENT_COMMANDS.filter((c) => c.name.split(' ')[0] === argv[0])
  return { spec: best, group, words: best ? best.name.split(' ').length : 1 }
}

const flagLine = (f: FlagSpec) => `  ${`--${f.name}${f.value ? ` ${f.value}` : ''}`.padEnd(30)} ${f.help}${f.repeatable ? ' (repeatable)' : ''}`

export function usageLine(spec: CommandSpec): string {
  return `relay ${spec.name}${spec.args ? ` ${spec.args}` : ''}${spec.flags?.length ? ' [flags]' : ''}`
}

/** `relay COMMAND --help`. */
export function clientCommandHelp(spec: CommandSpec): string {
  let out = `${usageLine(spec)}\n\n${spec.summary[0].toUpperCase()}${spec.summary.slice(1)}.\n`
  if (spec.description) out += `\n${spec.description}\n`
  if (spec.flags?.length) out += `\nFlags:\n${spec.flags.map(flagLine).join('\n')}\n`
  out += `\nGlobal flags:\n${GLOBAL_FLAGS.map(flagLine).join('\n')}\n`
  return out
}

function groupHelp(group: CommandSpec[]): string {
  return `${group.map((c) => `  ${usageLine(c).padEnd(44)} ${c.summary}`).join('\n')}\n\nRun "relay ${group[0].name} --help" for one of them.\n`
}

/** The lines of `relay --help` that list the agent-side commands. */
export function clientCommandsSummary(): string {
  return CLIENT_COMMANDS.map((c) => `  ${`relay ${c.name}${c.args ? ` ${c.args}` : ''}`.padEnd(36)} ${c.summary}`).join('\n')
}

/** Help for `relay help WORDS…` / `relay WORDS… --help`; undefined when the words name no agent command. */
export function clientHelp(words: string[]): string | undefined {
  const { spec, group } = resolveCommand(words)
  if (spec) return clientCommandHelp(spec)
  if (group.length) return groupHelp(group)
  return undefined
}

function formatError(err: unknown, relayUrl: string | undefined): string {
  if (err instanceof RelayApiError) {
    let line = errorLine(`${err.message} (code ${err.code}, request ${err.requestId ?? 'unknown'})`)
    if (err.details !== null && err.details !== undefined) line += `  details: ${JSON.stringify(err.details)}\n`
    const hint = err.code === 'not_found' && relayUrl ? relayPathHint(relayUrl) : undefined
    if (hint) line += `  hint: ${hint}\n`
    return line
  }
  // the reason is what a script or a person acts on: tampered, not for this key, unauthenticated…
  if (err instanceof DecryptError) return errorLine(`decryption failed (${err.reason}): ${err.message}`)
  return errorLine((err as Error)?.message ?? String(err))
}

/** Runs one agent-side command; resolves with the exit code (0 ok, 1 failed, 2 usage). */
export async function runClientCommand(argv: string[], io: ClientIo): Promise<number> {
  const { spec, group, words } = resolveCommand(argv)
  const wantsHelp = argv.includes('--help') || argv.includes('-h')
  if (!spec) {
    if (group.length && wantsHelp) {
      io.stdout.write(groupHelp(group))
      return 0
    }
    const what = argv.length === 1 ? `"relay ${argv[0]}" needs a subcommand` : `unknown command "relay ${argv.slice(0, 2).join(' ')}"`
    io.stderr.write(`${errorLine(what)}${group.length ? groupHelp(group) : ''}`)
    return 2
  }
  if (wantsHelp) {
    io.stdout.write(clientCommandHelp(spec))
    return 0
  }
  let relayUrl: string | undefined
  try {
    const flagSpecs = [...GLOBAL_FLAGS, ...(spec.flags ?? [])]
    const parsed = parseArgs(argv.slice(words), {
      known: flagSpecs.filter((f) => f.value).map((f) => f.name),
      booleans: flagSpecs.filter((f) => !f.value).map((f) => f.name),
    })
    for (const f of flagSpecs) {
      if (!f.repeatable && (parsed.lists[f.name]?.length ?? 0) > 1) throw new UsageError(`--${f.name} was given more than once`)
    }
    const n = parsed.positionals.length
    if (n < (spec.minArgs ?? 0) || n > (spec.maxArgs ?? Infinity)) {
      throw new UsageError(n < (spec.minArgs ?? 0) ? `missing ${spec.args ?? 'arguments'}` : `unexpected argument "${parsed.positionals[spec.maxArgs ?? 0]}"`)
    }
    relayUrl = (parsed.flags.relay ?? io.env.RELAY_URL ?? DEFAULT_RELAY_URL).replace(/\/+$/, '')
    if (!/^https?:\/\/[^\s]+$/.test(relayUrl)) throw new UsageError(`--relay must be an http:// or https:// URL, got "${relayUrl}"`)
    const keyFile = resolve(io.cwd, parsed.flags.key ?? io.env.RELAY_KEY_FILE ?? DEFAULT_KEY_FILE)
    let client: RelayClient | undefined
    const ctx: CommandContext = {
      args: parsed.positionals,
      flags: parsed.flags,
      lists: parsed.lists,
      json: parsed.flags.json === 'true',
      relayUrl,
      keyFile,
      client: () => (client ??= makeClient(relayUrl!, keyFile, (line) => void io.stderr.write(line), spec.publishesDeclaration !== false && io.env.RELAY_PUBLISH_ENCRYPTION !== 'false')),
      out: {
        text: (s) => void io.stdout.write(s),
        json: (v) => void io.stdout.write(JSON.stringify(v, null, 2) + '\n'),
        note: (s) => void io.stderr.write(s),
      },
      stderr: io.stderr,
    }
    await spec.run(ctx)
    return 0
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr.write(`${errorLine(err.message)}usage: ${usageLine(spec)} (see relay ${spec.name} --help)\n`)
      return 2
    }
    io.stderr.write(formatError(err, relayUrl))
    return 1
  }
}

function makeClient(relayUrl: string, keyFile: string, warn: (line: string) => void, publish: boolean): RelayClient {
  // the client names the URL when nothing answers (RelayConnectionError) or something else does (NotARelayError)
  return new RelayClient({ baseUrl: relayUrl, keys: readKeyFile(keyFile, warn), encryption: { publish: publish && declarationMarker(keyFile) } })
}

/**
 * The key pair in a key file (any format of decodeKeyFile: relay keygen's, or an MRP tool's raw or
 * encoded seed), or an error that says how to get one. A file that others may read gets a warning on
 * `warn` (stderr): the seed is the agent's whole identity.
 */
export function readKeyFile(keyFile: string, warn: (line: string) => void = (line) => void process.stderr.write(line)): KeyPair {
  let content: Uint8Array
  try {
    content = readFileSync(keyFile)
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    throw new Error(
      code === 'ENOENT'
        ? `no key file at ${keyFile} (create one with "relay keygen --out ${keyFile}", or pass --key FILE / set RELAY_KEY_FILE)`
        : `cannot read key file ${keyFile}: ${(err as Error).message}`,
    )
  }
  let keys: KeyPair
  try {
    keys = decodeKeyFile(content)
  } catch (err) {
    throw new Error(`key file ${keyFile}: ${(err as Error).message}`)
  }
  const mode = process.platform === 'win32' ? 0 : statSync(keyFile).mode & 0o777
  if (mode & 0o077) {
    warn(`warning: key file ${keyFile} can be read by others (mode ${mode.toString(8).padStart(4, '0')}); make it private with: chmod 600 ${keyFile}\n`)
  }
  return keys
}
