/** Parts of an absolute request URL as the server received it, without parsing or normalising. */

/** Index of the "/" that starts the path (after `scheme://host`), or -1. */
export function pathStart(url: string): number {
  return url.indexOf('/', url.indexOf('//') + 2)
}

/**
 * The request target as received: path, query and anything after it — a `#` a client put on the request
 * line included (the runtime keeps it). What a signature covers, up to the runtime's own
 * re-encodings that auth/canonical.ts undoes.
 */
export function pathWithQuery(url: string): string {
  const start = pathStart(url)
  return start < 0 ? '/' : url.slice(start)
}

/** The path alone, without query or fragment. */
export function pathOnly(url: string): string {
  const target = pathWithQuery(url)
  const end = target.search(/[?#]/)
  return end < 0 ? target : target.slice(0, end)
}
