/**
 * The shape of an agent-side command (`relay whoami`, `relay profile set`, …). Each command is a file
 * in this folder exporting one CommandSpec (or several for subcommands); `index.ts` lists them. The
 * runner (`../client-cli.ts`) parses flags, prints help, builds the client and renders errors, so a
 * command only says what it calls and how it prints the answer.
 */
import type { RelayClient } from '../../client/index.ts'

export interface FlagSpec {
  name: string
  /** Placeholder for the value, e.g. `URL`; a flag without one is a boolean. */
  value?: string
  help: string
  /** May be given several times (all values are in `ctx.lists`). */
  repeatable?: boolean
}

export interface CommandSpec {
  /** Words that select it: `whoami`, `profile set`. */
  name: string
  /** Positional arguments as shown in usage, e.g. `MESSAGE_ID` or `[KEY]`. */
  args?: string
  minArgs?: number
  maxArgs?: number
  summary: string
  /** Extra paragraphs for `--help`. */
  description?: string
  flags?: FlagSpec[]
  /** Commands that never talk to the relay skip building a client. */
  offline?: boolean
  /**
   * False for commands that write or delete the profile themselves: the runner's client otherwise
   * publishes the encryption declaration on a profile without one (see ../declaration-marker.ts).
   */
  publishesDeclaration?: false
  run(ctx: CommandContext): Promise<void>
}

export interface Output {
  /** Human-readable text, printed as is. */
  text(s: string): void
  /** One JSON document (for --json). */
  json(value: unknown): void
  /** Notes for a person (progress, hints); on stderr, so stdout stays clean for pipes. */
  note(s: string): void
}

export interface CommandContext {
  args: string[]
  /** Last value of each flag given (`'true'` for booleans). */
  flags: Record<string, string>
  /** Every value of each flag, in order (for repeatable flags). */
  lists: Record<string, string[]>
  /** --json: print the relay's JSON, nothing else. */
  json: boolean
  relayUrl: string
  keyFile: string
  /** The signing client for --relay and --key; reads the key file on first use. */
  client(): RelayClient
  out: Output
  /** Standard error, with whether it is a terminal (progress bars draw only there). */
  stderr: { write(s: string): unknown; isTTY?: boolean; columns?: number }
}

/** A thrown UsageError prints the command's usage hint and exits 2. */
export { UsageError } from '../args.ts'
