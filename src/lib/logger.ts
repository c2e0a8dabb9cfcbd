/** JSON-lines logger on stdout. Never give it bodies, signatures or secrets. */

export type LogLevel = 'debug' | 'info' | 'warn' | 'error'
const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 }

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void
  info(msg: string, fields?: Record<string, unknown>): void
  warn(msg: string, fields?: Record<string, unknown>): void
  error(msg: string, fields?: Record<string, unknown>): void
  enabled(level: LogLevel): boolean
}

export function createLogger(
  level: LogLevel = 'info',
  write: (line: string) => void = (line) => process.stdout.write(line + '\n'),
): Logger {
  const min = RANK[level]
  const log = (lvl: LogLevel) => (msg: string, fields?: Record<string, unknown>) => {
    if (RANK[lvl] < min) return
    write(JSON.stringify({ time: new Date().toISOString(), level: lvl, msg, ...fields }))
  }
  return {
    debug: log('debug'),
    info: log('info'),
    warn: log('warn'),
    error: log('error'),
    enabled: (lvl) => RANK[lvl] >= min,
  }
}

/** How long a repeated warning or error is held back (see quietRepeats). */
export const REPEAT_WINDOW_MS = 30_000

/**
 * Warnings and errors that repeat — the same message with the same error, as every timer and request
 * reports while the database is down — are written once per `windowMs`; the next one after that
 * carries `repeated`, how many were held back. Other lines pass through.
 */
export function quietRepeats(logger: Logger, windowMs = REPEAT_WINDOW_MS, now: () => number = () => performance.now()): Logger {
  const seen = new Map<string, { at: number; held: number }>()
  const quiet = (lvl: 'warn' | 'error') => (msg: string, fields?: Record<string, unknown>) => {
    const key = `${lvl}\u0000${msg}\u0000${String(fields?.error ?? '')}`
    const t = now()
    const last = seen.get(key)
    if (last && t - last.at < windowMs) {
      last.held++
      return
    }
    if (seen.size > 1000) for (const [k, v] of seen) if (t - v.at >= windowMs) seen.delete(k)
    seen.set(key, { at: t, held: 0 })
    logger[lvl](msg, last && last.held > 0 ? { ...fields, repeated: last.held } : fields)
  }
  return {
    debug: (m, f) => logger.debug(m, f),
    info: (m, f) => logger.info(m, f),
    warn: quiet('warn'),
    error: quiet('error'),
    enabled: (lvl) => logger.enabled(lvl),
  }
}

/** A logger that drops everything, for tests that do not look at logs. */
export const silentLogger: Logger = createLogger('error', () => {})
