/** Parsing of the duration and size strings accepted in configuration (docs/protocol.md §13). */

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }
const SIZE_UNITS: Record<string, number> = { b: 1, kib: 1024, mib: 1024 ** 2, gib: 1024 ** 3 }

/** "300s" → 300000. A bare number is milliseconds. Returns null when the text is not a duration. */
export function parseDurationMs(value: string | number): number | null {
  if (typeof value === 'number') return Number.isFinite(value) && value >= 0 ? value : null
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/i.exec(value)
  if (!m) return null
  const n = Number(m[1]) * DURATION_UNITS[(m[2] ?? 'ms').toLowerCase()]
  return Number.isFinite(n) ? Math.round(n) : null
}

/** "100MiB" → 104857600. A bare number is bytes. Returns null when the text is not a size. */
export function parseSizeBytes(value: string | number): number | null {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value >= 0 ? value : null
  const m = /^\s*(\d+(?:\.\d+)?)\s*(B|KiB|MiB|GiB)?\s*$/i.exec(value)
  if (!m) return null
  const n = Math.floor(Number(m[1]) * SIZE_UNITS[(m[2] ?? 'b').toLowerCase()])
  return Number.isSafeInteger(n) ? n : null
}

export function formatBytes(n: number): string {
  if (n >= 1024 ** 3 && n % 1024 ** 3 === 0) return `${n / 1024 ** 3}GiB`
  if (n >= 1024 ** 2 && n % 1024 ** 2 === 0) return `${n / 1024 ** 2}MiB`
  if (n >= 1024 && n % 1024 === 0) return `${n / 1024}KiB`
  return `${n}B`
}
