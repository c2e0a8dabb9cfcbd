/** Parts of an absolute request URL as the server received it, without parsing or normalising. */

/** Index of the "/" that starts the path (after `scheme://host`), or -1. */
export function pathStart(url: string): number {
  return url.indexOf('/', url.indexOf('//') + 2)
}

/** The request target exactly as sent: path plus query (what a signature covers, SPEC §1.1). */
export function pathWithQuery(url: string): string {
  const start = pathStart(url)
  if (start < 0) return '/'
  const hash = url.indexOf('#', start)
  return hash < 0 ? url.slice(start) : url.slice(start, hash)
}

/** The path alone. */
export function pathOnly(url: string): string {
  const target = pathWithQuery(url)
  const query = target.indexOf('?')
  return query < 0 ? target : target.slice(0, query)
}
