/** A small flag parser: `--name value`, `--name=value`, boolean flags, and positionals. */
export interface ParsedArgs {
  positionals: string[]
  /** The last value of each flag. */
  flags: Record<string, string>
  /** Every value of each flag, in order, for flags that may repeat (`--tag a --tag b`). */
  lists: Record<string, string[]>
}

/** 43 unpadded base64url characters: no flag is that long, so such an argument is never a flag. */
const PUBLIC_KEY = /^[A-Za-z0-9_-]{43}$/

export class UsageError extends Error {
  override name = 'UsageError'
}

/**
 * `booleans` lists flags that take no value. Unknown flags are refused when `known` is given.
 */
export function parseArgs(argv: string[], opts: { booleans?: string[]; known?: string[] } = {}): ParsedArgs {
  const booleans = new Set(opts.booleans ?? [])
  const known = opts.known ? new Set([...opts.known, ...booleans]) : null
  const positionals: string[] = []
  const flags: Record<string, string> = {}
  const lists: Record<string, string[]> = {}
  const set = (name: string, value: string) => {
    flags[name] = value
    ;(lists[name] ??= []).push(value)
  }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    if (arg === '--') {
      positionals.push(...argv.slice(i + 1))
      break
    }
    // a public key may start with "-" or "--" (base64url): it is always a positional
    if (PUBLIC_KEY.test(arg)) {
      positionals.push(arg)
      continue
    }
    if (!arg.startsWith('--') || arg === '--') {
      if (arg.startsWith('-') && arg.length > 1 && arg !== '-') {
        const short: Record<string, string> = { '-h': 'help', '-v': 'version', '-o': 'out' }
        if (!short[arg]) throw new UsageError(`unknown flag ${arg}`)
        const name = short[arg]
        if (booleans.has(name)) set(name, 'true')
        else {
          if (i + 1 >= argv.length) throw new UsageError(`${arg} needs a value`)
          set(name, argv[++i])
        }
        continue
      }
      positionals.push(arg)
      continue
    }
    const eq = arg.indexOf('=')
    const name = eq > 0 ? arg.slice(2, eq) : arg.slice(2)
    if (known && !known.has(name)) throw new UsageError(`unknown flag --${name}`)
    if (booleans.has(name)) {
      set(name, eq > 0 ? arg.slice(eq + 1) : 'true')
      continue
    }
    if (eq > 0) set(name, arg.slice(eq + 1))
    else {
      if (i + 1 >= argv.length) throw new UsageError(`--${name} needs a value`)
      set(name, argv[++i])
    }
  }
  return { positionals, flags, lists }
}
