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

/** A logger that drops everything, for tests that do not look at logs. */
export const silentLogger: Logger = createLogger('error', () => {})
