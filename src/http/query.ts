import { badRequest, type FieldErrors } from '../errors.ts'

/** Decodes one query component (`+` is a space); null when it is not valid percent-encoded UTF-8. */
function decodeComponent(text: string): string | null {
  if (!text.includes('%') && !text.includes('+')) return text
  try {
    return decodeURIComponent(text.replaceAll('+', ' '))
  } catch {
    return null
  }
}

/**
 * Query parameters as services take them: each name once as a string, a repeated name as an array,
 * empty pieces (`&&`) skipped, and a parameter with an empty value (`status=`, `tag=`) treated as
 * absent — the one leniency rule of docs/protocol.md ("What the relay ignores"). A name or value that is
 * not valid percent-encoded UTF-8 (`%ff`, `%ED%A0%80`, a lone `%`) is a 400 naming the parameter —
 * never silently replaced by U+FFFD. The map has no prototype, so a parameter named `__proto__` is just a name.
 */
export function rawQuery(request: Request): Record<string, string | string[]> {
  const url = request.url
  const q = url.indexOf('?')
  const out: Record<string, string | string[]> = Object.create(null)
  if (q < 0) return out
  const hash = url.indexOf('#', q)
  const fields: FieldErrors = {}
  for (const piece of (hash < 0 ? url.slice(q + 1) : url.slice(q + 1, hash)).split('&')) {
    if (piece === '') continue
    const eq = piece.indexOf('=')
    const rawName = eq < 0 ? piece : piece.slice(0, eq)
    const name = decodeComponent(rawName)
    const value = decodeComponent(eq < 0 ? '' : piece.slice(eq + 1))
    if (name === null || value === null) {
      fields[name ?? rawName] = 'is not valid percent-encoded UTF-8'
      continue
    }
    if (value === '') continue
    const prev = out[name]
    out[name] = prev === undefined ? value : Array.isArray(prev) ? [...prev, value] : [prev, value]
  }
  if (Object.keys(fields).length) throw badRequest('Invalid query parameters', fields)
  return out
}
