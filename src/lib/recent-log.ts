/**
 * The last warnings and errors of the running relay, kept in memory for operators (GET /v1/admin/errors,
 * the console): a fixed-size ring, so a burst of failures costs a bounded amount of memory and the
 * newest lines always win. Nothing here is persisted; a restart starts empty.
 */
import type { Clock } from './clock.ts'
import type { Logger, LogLevel } from './logger.ts'

export interface RecentEntry {
  /** RFC 3339 UTC. */
  time: string
  level: 'warn' | 'error'
  msg: string
  /** The line's other fields, as logged (the logger is never given bodies or secrets). */
  fields: Record<string, unknown>
}

/** Longest text kept of one field, so one huge stack or error text cannot fill the ring's memory. */
const MAX_FIELD_CHARS = 2000

export class RecentLog {
  private readonly ring: (RecentEntry | undefined)[]
  private next = 0
  private count = 0

  constructor(readonly capacity = 200) {
    this.ring = new Array(capacity)
  }

  push(entry: RecentEntry): void {
    if (this.capacity === 0) return
    this.ring[this.next] = entry
    this.next = (this.next + 1) % this.capacity
    this.count = Math.min(this.count + 1, this.capacity)
  }

  /** Newest first, at most `limit`. */
  list(limit = this.capacity): RecentEntry[] {
    const out: RecentEntry[] = []
    for (let i = 1; i <= Math.min(limit, this.count); i++) {
      out.push(this.ring[(this.next - i + this.capacity) % this.capacity] as RecentEntry)
    }
    return out
  }

  /** Lines recorded so far (at most `capacity` are kept). */
  get size(): number {
    return this.count
  }
}

function clip(fields: Record<string, unknown> | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(fields ?? {})) {
    const text = typeof v === 'string' ? v : JSON.stringify(v)
    out[k] = typeof text === 'string' && text.length > MAX_FIELD_CHARS ? text.slice(0, MAX_FIELD_CHARS) + '…' : v
  }
  return out
}

/** `inner`, whose warn and error lines are also kept in `recent` (whatever level `inner` writes). */
export function recordingLogger(inner: Logger, recent: RecentLog, clock: Clock): Logger {
  const keep = (level: 'warn' | 'error') => (msg: string, fields?: Record<string, unknown>) => {
    recent.push({ time: new Date(clock.now()).toISOString(), level, msg, fields: clip(fields) })
    inner[level](msg, fields)
  }
  return {
    debug: (msg, fields) => inner.debug(msg, fields),
    info: (msg, fields) => inner.info(msg, fields),
    warn: keep('warn'),
    error: keep('error'),
    enabled: (level: LogLevel) => inner.enabled(level),
  }
}
