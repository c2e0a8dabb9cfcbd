#!/usr/bin/env bun
/** The `relay` command line: serve (default), keygen, admin, backup, migrate, health, completion, mcp, the agent commands, --version / --help. */
import { ADMIN_BOOLEANS, ADMIN_FLAGS, admin } from './cli/admin.ts'
import { BACKUP_BOOLEANS, BACKUP_FLAGS, backup } from './cli/backup.ts'
import { parseArgs, UsageError } from './cli/args.ts'
import { GLOBAL_FLAGS, clientHelp, isClientCommand, runClientCommand } from './cli/client-cli.ts'
import { CLIENT_COMMANDS } from './cli/commands/index.ts'
import { completionScript, type CompletionEntry } from './cli/completion.ts'
import { errorLine } from './cli/format.ts'
import { HEALTH_BOOLEANS, HEALTH_FLAGS, health } from './cli/health.ts'
import { HELP, commandHelp } from './cli/help.ts'
import { keygen } from './cli/keygen.ts'
import { MIGRATE_BOOLEANS, MIGRATE_FLAGS, migrate, prepareTarget } from './cli/migrate.ts'
import { SERVE_BOOLEANS, SERVE_FLAGS, serve } from './cli/serve.ts'
import { ConfigError } from './config/load.ts'
import { VERSION } from './version.ts'

interface Command {
  flags: string[]
  booleans?: string[]
  /** Words that may follow the command (for completion), e.g. admin's actions. */
  subcommands?: string[]
  /** Resolves with the exit code, or nothing for 0. */
  run: (pos: string[], flags: Record<string, string>) => unknown
}

const COMMANDS: Record<string, Command> = {
  serve: { flags: SERVE_FLAGS, booleans: SERVE_BOOLEANS, run: (_p, f) => serve(f) },
  keygen: { flags: ['out'], booleans: ['json'], run: (_p, f) => keygen(f) },
  admin: { flags: ADMIN_FLAGS, booleans: ADMIN_BOOLEANS, subcommands: ['suspend', 'unsuspend', 'stats', 'agents', 'allow', 'revoke', 'allowed', 'webhooks'], run: (p, f) => admin(p, f) },
  backup: { flags: BACKUP_FLAGS, booleans: BACKUP_BOOLEANS, run: (p, f) => backup(p, f) },
  migrate: {
    flags: MIGRATE_FLAGS,
    booleans: MIGRATE_BOOLEANS,
    run: (p, f) => migrate(p, f, { prepareTarget, env: process.env, stdout: process.stdout, stderr: process.stderr }),
  },
  health: { flags: HEALTH_FLAGS, booleans: HEALTH_BOOLEANS, run: (_p, f) => health(f) },
  completion: { flags: [], subcommands: ['bash', 'zsh'], run: ([shell]) => void process.stdout.write(completionScript(shell, completionEntries())) },
}

/** Every command and its flags, operator and agent side, for `relay completion`. */
function completionEntries(): CompletionEntry[] {
  const entries: CompletionEntry[] = []
  for (const [name, c] of Object.entries(COMMANDS)) {
    const flags = [...c.flags, ...(c.booleans ?? []), 'help']
    entries.push({ path: name, flags })
    for (const sub of c.subcommands ?? []) entries.push({ path: `${name} ${sub}`, flags })
  }
  for (const c of CLIENT_COMMANDS) entries.push({ path: c.name, flags: [...(c.flags ?? []), ...GLOBAL_FLAGS].map((f) => f.name) })
  entries.push({ path: 'help', flags: [] }, { path: 'version', flags: [] }, { path: '', flags: ['help', 'version'] })
  return entries
}

/**
 * `relay whoami | head -1`: once the reader of stdout (or stderr) has gone, nothing more can be said,
 * so the command ends quietly instead of dying on EPIPE with a stack trace.
 */
function exitQuietlyWhenOutputCloses(): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EPIPE') process.exit(0)
      throw err
    })
  }
}

async function main(argv: string[]): Promise<number | void> {
  const first = argv[0]
  if (first === '--version' || first === '-v' || first === 'version') {
    process.stdout.write(`relay ${VERSION}\n`)
    return
  }
  if (first === '--help' || first === '-h' || first === 'help') {
    const words = argv.slice(1)
    if (words[0] === 'mcp') return runMcpCommand(['--help'])
    process.stdout.write(words.length === 0 ? HELP : COMMANDS[words[0]] ? commandHelp(words[0]) : (clientHelp(words) ?? HELP))
    return
  }
  const name = first === undefined || first.startsWith('-') ? 'serve' : first
  if (name === 'mcp') return runMcpCommand(argv.slice(1))
  const command = COMMANDS[name]
  if (!command && isClientCommand(name)) {
    return runClientCommand(argv, { env: process.env, cwd: process.cwd(), stdout: process.stdout, stderr: process.stderr })
  }
  if (!command) throw new UsageError(`unknown command "${name}" (see relay --help)`)
  const rest = name === first ? argv.slice(1) : argv
  if (rest.includes('--help') || rest.includes('-h')) {
    process.stdout.write(commandHelp(name))
    return
  }
  const { positionals, flags } = parseArgs(rest, { known: command.flags, booleans: command.booleans })
  const code = await command.run(positionals, flags)
  return typeof code === 'number' ? code : undefined
}

/** `relay mcp`, loaded only when asked for, so that serving never loads the MCP SDK. */
async function runMcpCommand(args: string[]): Promise<void> {
  const { MCP_HELP, runMcp } = await import('./mcp/command.ts')
  if (args.includes('--help') || args.includes('-h')) {
    process.stdout.write(MCP_HELP)
    return
  }
  const stopped = new Promise((resolve) => {
    process.once('SIGINT', resolve)
    process.once('SIGTERM', resolve)
  })
  const io = { env: process.env, cwd: process.cwd(), stdin: process.stdin, stdout: process.stdout, stderr: process.stderr, stopped }
  // open sockets and timers must not keep the process alive once the session is over
  process.exit(await runMcp(args, io))
}

exitQuietlyWhenOutputCloses()
main(process.argv.slice(2)).then(
  (code) => {
    if (code) process.exitCode = code
  },
  (err) => {
    const message = err instanceof ConfigError ? `configuration: ${(err as Error).message}` : (err as Error).message
    process.stderr.write(errorLine(message))
    process.exit(err instanceof UsageError ? 2 : 1)
  },
)
