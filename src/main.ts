#!/usr/bin/env bun
/** The `relay` command line: serve (default), keygen, admin, backup, the agent commands, --version / --help. */
import { ADMIN_BOOLEANS, ADMIN_FLAGS, admin } from './cli/admin.ts'
import { BACKUP_BOOLEANS, BACKUP_FLAGS, backup } from './cli/backup.ts'
import { parseArgs, UsageError } from './cli/args.ts'
import { clientHelp, isClientCommand, runClientCommand } from './cli/client-cli.ts'
import { HELP, commandHelp } from './cli/help.ts'
import { keygen } from './cli/keygen.ts'
import { SERVE_FLAGS, serve } from './cli/serve.ts'
import { ConfigError } from './config/load.ts'
import { VERSION } from './version.ts'

const COMMANDS: Record<string, { flags: string[]; booleans?: string[]; run: (pos: string[], flags: Record<string, string>) => unknown }> = {
  serve: { flags: SERVE_FLAGS, run: (_p, f) => serve(f) },
  keygen: { flags: ['out'], booleans: ['json'], run: (_p, f) => keygen(f) },
  admin: { flags: ADMIN_FLAGS, booleans: ADMIN_BOOLEANS, run: (p, f) => admin(p, f) },
  backup: { flags: BACKUP_FLAGS, booleans: BACKUP_BOOLEANS, run: (p, f) => backup(p, f) },
}

async function main(argv: string[]): Promise<void> {
  const first = argv[0]
  if (first === '--version' || first === '-v' || first === 'version') {
    process.stdout.write(`relay ${VERSION}\n`)
    return
  }
  if (first === '--help' || first === '-h' || first === 'help') {
    const words = argv.slice(1)
    process.stdout.write(words.length === 0 ? HELP : COMMANDS[words[0]] ? commandHelp(words[0]) : (clientHelp(words) ?? HELP))
    return
  }
  const name = first === undefined || first.startsWith('-') ? 'serve' : first
  const command = COMMANDS[name]
  if (!command && isClientCommand(name)) {
    process.exitCode = await runClientCommand(argv, { env: process.env, cwd: process.cwd(), stdout: process.stdout, stderr: process.stderr })
    return
  }
  if (!command) throw new UsageError(`unknown command "${name}" (see relay --help)`)
  const rest = name === first ? argv.slice(1) : argv
  if (rest.includes('--help') || rest.includes('-h')) {
    process.stdout.write(commandHelp(name))
    return
  }
  const { positionals, flags } = parseArgs(rest, { known: command.flags, booleans: command.booleans })
  await command.run(positionals, flags)
}

main(process.argv.slice(2)).catch((err) => {
  const prefix = err instanceof UsageError ? 'usage error' : err instanceof ConfigError ? 'configuration error' : 'error'
  process.stderr.write(`relay: ${prefix}: ${(err as Error).message}\n`)
  process.exit(err instanceof UsageError ? 2 : 1)
})
