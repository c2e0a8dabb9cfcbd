/** Plain-text output helpers shared by the operator and agent commands. */

/** 1536 → "1.5 KiB"; exact bytes below 1 KiB. */
export function humanBytes(n: number): string {
  const units = ['KiB', 'MiB', 'GiB', 'TiB']
  if (n < 1024) return `${n} B`
  let value = n
  let unit = 'B'
  for (const u of units) {
    if (value < 1024) break
    value /= 1024
    unit = u
  }
  return `${value.toFixed(value < 10 ? 1 : 0)} ${unit}`
}

/** Left-aligned columns separated by two spaces; the header row is upper-cased. */
export function table(headers: string[], rows: (string | number | undefined | null)[][]): string {
  const cells = [headers.map((h) => h.toUpperCase()), ...rows.map((r) => r.map((c) => (c === undefined || c === null ? '-' : String(c))))]
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => r[i]?.length ?? 0)))
  return cells.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]))).join('  ')).join('\n') + '\n'
}

/** `key  value` lines with the keys aligned; undefined and null values (unset fields) are skipped. */
export function fields(entries: [string, unknown][]): string {
  const shown = entries.filter(([, v]) => v !== undefined && v !== null)
  const width = Math.max(0, ...shown.map(([k]) => k.length))
  return shown.map(([k, v]) => `${k.padEnd(width)}  ${typeof v === 'string' ? v : JSON.stringify(v)}`).join('\n') + '\n'
}

/**
 * Every failure the command line reports starts with the same prefix, whatever failed (a flag, the
 * configuration, the relay's answer), so scripts and people can grep for one thing.
 */
export const ERROR_PREFIX = 'relay: error: '

/** One error line (more lines may follow it, indented or as a usage hint). */
export const errorLine = (message: string): string => `${ERROR_PREFIX}${message}\n`
