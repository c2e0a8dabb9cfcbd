/** IP address text as numbers: shared by the webhook target policy and the per-address limits. */

/** An IPv4 address in dotted form as a 32-bit number, or null. */
export function parseV4(text: string): number | null {
  const parts = text.split('.')
  if (parts.length !== 4) return null
  let n = 0
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p) || Number(p) > 255) return null
    n = n * 256 + Number(p)
  }
  return n
}

/** The eight 16-bit groups of an IPv6 address (with an optional dotted IPv4 tail), or null. */
export function parseV6(text: string): number[] | null {
  let s = text.toLowerCase()
  const zone = s.indexOf('%')
  if (zone >= 0) s = s.slice(0, zone)
  let tail: number[] = []
  const lastColon = s.lastIndexOf(':')
  if (lastColon < 0) return null
  if (s.slice(lastColon + 1).includes('.')) {
    // a dotted IPv4 tail stands for the last two groups
    const v4 = parseV4(s.slice(lastColon + 1))
    if (v4 === null) return null
    tail = [v4 >>> 16, v4 & 0xffff]
    const head = s.slice(0, lastColon + 1)
    s = head.endsWith('::') ? head : head.slice(0, -1)
  }
  const halves = s.split('::')
  if (halves.length > 2) return null
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((g) => (/^[0-9a-f]{1,4}$/.test(g) ? parseInt(g, 16) : NaN)))
  const head = parse(halves[0])
  const rest = halves.length === 2 ? parse(halves[1]) : []
  const given = head.length + rest.length + tail.length
  if ([...head, ...rest].some(Number.isNaN)) return null
  if (halves.length === 1 && given !== 8) return null
  if (halves.length === 2 && given > 7) return null
  return [...head, ...new Array(8 - given).fill(0), ...rest, ...tail]
}

/** The address without the brackets of a URL or `Host` form (`[::1]` → `::1`). */
export function unbracket(address: string): string {
  if (!address.startsWith('[')) return address
  const end = address.indexOf(']')
  return address.slice(1, end > 0 ? end : undefined)
}
