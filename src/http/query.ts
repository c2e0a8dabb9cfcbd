/** Query parameters as services take them: each name once as a string, a repeated name as an array. */
export function rawQuery(request: Request): Record<string, string | string[]> {
  const url = request.url
  const q = url.indexOf('?')
  const out: Record<string, string | string[]> = {}
  if (q < 0) return out
  const hash = url.indexOf('#', q)
  for (const [name, value] of new URLSearchParams(hash < 0 ? url.slice(q + 1) : url.slice(q + 1, hash))) {
    const prev = out[name]
    out[name] = prev === undefined ? value : Array.isArray(prev) ? [...prev, value] : [prev, value]
  }
  return out
}
