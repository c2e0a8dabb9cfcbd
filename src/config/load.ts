import { existsSync } from 'node:fs'
import { resolve } from 'node:path'
import { isPublicKey } from '../auth/keys.ts'
import { parseAddressList } from '../lib/address-key.ts'
import { parseDurationMs, parseSizeBytes } from '../lib/units.ts'
import type { Config, ConfigOverrides } from './config.ts'
import { OPTIONS, type OptionSpec } from './options.ts'

/** A configuration problem; the message is one line naming the variable and what is wrong. */
export class ConfigError extends Error {
  override name = 'ConfigError'
}

type Raw = string | number | boolean | null

/** Field name in Config for an option key: durations end in Ms, sizes in Bytes. */
function fieldPath(spec: OptionSpec): string[] {
  const parts = spec.key.split('.')
  const last = parts.length - 1
  if (spec.kind === 'duration' || spec.kind === 'durations') parts[last] += 'Ms'
  if (spec.kind === 'size') parts[last] += 'Bytes'
  return parts
}

function parseValue(spec: OptionSpec, raw: Raw, source: string): unknown {
  const fail = (what: string): never => {
    throw new ConfigError(`${source}: ${what} (got ${JSON.stringify(raw)})`)
  }
  const range = (n: number, unit = ''): number => {
    if (spec.min !== undefined && n < spec.min) fail(`must be at least ${spec.min}${unit}`)
    if (spec.max !== undefined && n > spec.max) fail(`must be at most ${spec.max}${unit}`)
    return n
  }
  switch (spec.kind) {
    case 'string':
      if (typeof raw !== 'string' || raw.trim() === '') fail('must be a non-empty string')
      return (raw as string).trim()
    case 'text':
      // may be empty (an empty list)
      if (typeof raw !== 'string') fail('must be a string')
      return (raw as string).trim()
    case 'choice': {
      const v = String(raw).trim().toLowerCase()
      if (!spec.choices?.includes(v)) fail(`must be one of ${spec.choices?.join(', ')}`)
      return v
    }
    case 'port': {
      const n = typeof raw === 'number' ? raw : /^\d+$/.test(String(raw).trim()) ? Number(String(raw).trim()) : NaN
      if (!Number.isInteger(n) || n < 0 || n > 65535) fail('must be a port number 0–65535')
      return n
    }
    case 'int': {
      const n = typeof raw === 'number' ? raw : /^-?\d+$/.test(String(raw).trim()) ? Number(String(raw).trim()) : NaN
      if (!Number.isSafeInteger(n)) fail('must be an integer')
      return range(n)
    }
    case 'duration': {
      const n = raw === null || typeof raw === 'boolean' ? null : parseDurationMs(raw)
      if (n === null) fail('must be a duration such as 500ms, 30s, 5m, 1h or 7d')
      return range(n as number, ' ms')
    }
    case 'durations': {
      const list = Array.isArray(raw) ? raw : typeof raw === 'string' ? raw.split(',') : null
      if (!list || list.length === 0) fail('must be a comma-separated list of durations')
      return (list as (string | number)[]).map((item) => {
        const n = parseDurationMs(typeof item === 'string' ? item.trim() : item)
        if (n === null) fail('must be a comma-separated list of durations such as 1m,5m,1h')
        return n as number
      })
    }
    case 'size': {
      const n = raw === null || typeof raw === 'boolean' ? null : parseSizeBytes(raw)
      if (n === null) fail('must be a size such as 512KiB, 100MiB or 1GiB')
      return range(n as number, ' bytes')
    }
    case 'bool': {
      if (typeof raw === 'boolean') return raw
      const s = String(raw).trim().toLowerCase()
      if (['true', '1', 'yes', 'on'].includes(s)) return true
      if (['false', '0', 'no', 'off'].includes(s)) return false
      return fail('must be true or false')
    }
    case 'level': {
      const s = String(raw).trim().toLowerCase()
      if (!['debug', 'info', 'warn', 'error'].includes(s)) fail('must be one of debug, info, warn, error')
      return s
    }
    case 'keys': {
      // a list of public keys: comma-separated text (env, flag) or an array (config file); each must be a key
      const list = Array.isArray(raw) ? raw : typeof raw === 'string' ? raw.split(',') : null
      if (!list) fail('must be a comma-separated list of public keys')
      const keys = (list as unknown[]).map((item) => (typeof item === 'string' ? item.trim() : item)).filter((item) => item !== '')
      for (const key of keys) if (!isPublicKey(key)) fail(`"${String(key).slice(0, 60)}" is not a public key (43 base64url characters)`)
      return [...new Set(keys as string[])]
    }
    case 'addr': {
      if (raw === null || raw === '') return null
      const m = /^(?:\[([0-9a-fA-F:]+)\]|([^:\s]+)):(\d{1,5})$/.exec(String(raw).trim())
      const port = m ? Number(m[3]) : NaN
      if (!m || port > 65535) fail('must be host:port, e.g. 127.0.0.1:9090')
      return { host: (m as RegExpExecArray)[1] ?? (m as RegExpExecArray)[2], port }
    }
  }
}

function setPath(target: Record<string, any>, path: string[], value: unknown): void {
  let node = target
  for (const part of path.slice(0, -1)) node = node[part] ??= {}
  node[path[path.length - 1]] = value
}

function getPath(source: Record<string, any> | undefined, path: string[]): unknown {
  let node: any = source
  for (const part of path) {
    if (node === null || typeof node !== 'object' || !(part in node)) return undefined
    node = node[part]
  }
  return node
}

/** The built-in defaults, fully parsed. */
export function defaultConfig(): Config {
  const config: Record<string, any> = {}
  for (const spec of OPTIONS) setPath(config, fieldPath(spec), parseValue(spec, spec.default, spec.key))
  return config as Config
}

/** Rejects keys in a config file that no option has, so a typo is not silently ignored. */
function checkFileKeys(file: Record<string, unknown>, source: string, prefix = ''): void {
  for (const [k, v] of Object.entries(file)) {
    const key = prefix + k
    if (OPTIONS.some((o) => o.key === key)) continue
    if (v && typeof v === 'object' && !Array.isArray(v) && OPTIONS.some((o) => o.key.startsWith(key + '.'))) {
      checkFileKeys(v as Record<string, unknown>, source, key + '.')
      continue
    }
    throw new ConfigError(`${source}: unknown option "${key}"`)
  }
}

export interface LoadInput {
  /** Parsed command-line flags, by flag name without dashes (`port`, `data-dir`, `config`). */
  flags?: Record<string, string>
  env?: Record<string, string | undefined>
  cwd?: string
}

/** Loads a config file (default export of a plain object). `relay.config.ts` has no runtime imports. */
async function loadFile(path: string): Promise<Record<string, unknown>> {
  let mod: any
  try {
    mod = await import(path)
  } catch (err) {
    throw new ConfigError(`${path}: cannot be loaded: ${(err as Error).message.split('\n')[0]}`)
  }
  const value = mod?.default ?? {}
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ConfigError(`${path}: the default export must be an object`)
  }
  return value
}

/**
 * Resolves the configuration: defaults ← relay.config.ts (or --config FILE) ← RELAY_* environment ←
 * flags. Validated once; the first problem throws a ConfigError whose message is one line.
 */
export async function loadConfig(input: LoadInput = {}): Promise<Config> {
  const env = input.env ?? process.env
  const flags = input.flags ?? {}
  const cwd = input.cwd ?? process.cwd()
  let file: Record<string, unknown> = {}
  let fileName = 'relay.config.ts'
  const explicit = flags.config ?? env.RELAY_CONFIG
  if (explicit) {
    const path = resolve(cwd, explicit)
    if (!existsSync(path)) throw new ConfigError(`--config: file not found: ${path}`)
    file = await loadFile(path)
    fileName = explicit
  } else if (existsSync(resolve(cwd, 'relay.config.ts'))) {
    file = await loadFile(resolve(cwd, 'relay.config.ts'))
  }
  checkFileKeys(file, fileName)

  const config: Record<string, any> = {}
  // where each value came from, so a later check names what the user wrote
  const sources: Record<string, string> = {}
  for (const spec of OPTIONS) {
    let raw: Raw = spec.default
    let source = spec.key
    const fromFile = getPath(file, spec.key.split('.'))
    if (fromFile !== undefined) [raw, source] = [fromFile as Raw, `${fileName}: ${spec.key}`]
    // an empty variable means unset (as systemd EnvironmentFile lines often are), except for free text,
    // where empty is a value of its own (RELAY_RATE_ADDRESS_EXEMPT= exempts nothing)
    if (env[spec.env] !== undefined && (env[spec.env] !== '' || spec.kind === 'text')) [raw, source] = [env[spec.env] as string, spec.env]
    const flagName = spec.flag.slice(2)
    if (flags[flagName] !== undefined) [raw, source] = [flags[flagName], spec.flag]
    setPath(config, fieldPath(spec), parseValue(spec, raw, source))
    sources[spec.key] = source
  }
  config.dataDir = resolve(cwd, config.dataDir)
  checkAddressLists(config as Config, { trustProxy: sources.trustProxy, addressExempt: sources['rateLimits.addressExempt'] })
  return config as Config
}

/**
 * The exempt and trusted-proxy lists must parse, and neither may cover every address. `true` for the
 * trusted proxies is refused rather than read as "any peer": that would let every client that reaches
 * the relay directly pick its own address in X-Forwarded-For.
 */
export function checkAddressLists(
  config: Pick<Config, 'trustProxy' | 'rateLimits'>,
  names: { trustProxy?: string; addressExempt?: string } = {},
): void {
  const trustName = names.trustProxy ?? 'RELAY_TRUST_PROXY'
  if (/^(true|yes|on|1)$/i.test(config.trustProxy)) {
    throw new ConfigError(`${trustName}: name the proxy's address (e.g. 127.0.0.1,::1), not "true": any peer could then choose its own address`)
  }
  if (/^(false|no|off|0)$/i.test(config.trustProxy)) config.trustProxy = ''
  try {
    parseAddressList(config.rateLimits.addressExempt, names.addressExempt ?? 'RELAY_RATE_ADDRESS_EXEMPT')
    parseAddressList(config.trustProxy, trustName)
  } catch (err) {
    throw new ConfigError((err as Error).message)
  }
}

/** Defaults with overrides merged one level deep; for tests and embedding. */
export function withOverrides(overrides: ConfigOverrides = {}): Config {
  const base = defaultConfig() as unknown as Record<string, any>
  for (const [k, v] of Object.entries(overrides)) {
    base[k] = v && typeof v === 'object' && !Array.isArray(v) ? { ...base[k], ...v } : v
  }
  return base as unknown as Config
}
