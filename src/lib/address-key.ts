/**
 * Which client a request counts against, for every per-address limit (request rate, pre-auth memory,
 * unauthenticated WebSockets, new agents per hour):
 *
 * - the address is the socket's peer, or the last `X-Forwarded-For` entry when — and only when — that
 *   peer is one of the proxies the operator named (RELAY_TRUST_PROXY); an entry that is not a plain IP
 *   address (a name, a `:port`, leading zeros, brackets) is ignored and the peer's address counts;
 * - addresses the operator exempts (RELAY_RATE_ADDRESS_EXEMPT) count against relay-wide budgets only;
 * - the key is the IPv4 address as is (also when mapped into IPv6), or the IPv6 address's /56 prefix:
 *   the block an ISP usually gives one home or site, so a subscriber rotating through its /64s (each
 *   inside that /56) is still limited as one.
 *
 * Neither list may cover the whole internet: that would exempt every client, or let every client pick
 * its own address.
 */
import { BlockList, isIP } from 'node:net'
import { parseV6, unbracket } from './ip.ts'

/** The IPv6 prefix length per-address limits aggregate at. */
export const IPV6_PREFIX_BITS = 56

/**
 * The key an address is counted under: IPv4 as is (also when mapped into IPv6); IPv6 by its /56
 * prefix (which holds every /64 a subscriber may rotate through).
 */
export function addressKey(address: string): string {
  const a = unbracket(address.trim().toLowerCase().slice(0, 64))
  if (!a.includes(':')) return a
  const g = parseV6(a)
  if (!g) return a
  if (g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff) return [g[6] >> 8, g[6] & 0xff, g[7] >> 8, g[7] & 0xff].join('.')
  // /56: three whole groups and the high byte of the fourth
  const head = [g[0], g[1], g[2], g[3] & 0xff00].map((x) => x.toString(16))
  return `${head.join(':')}::/${IPV6_PREFIX_BITS}`
}

/** Whether `text` is a plain IP address: dotted IPv4 without leading zeros, or IPv6; no port, no brackets. */
export function isPlainIp(text: string): boolean {
  return isIP(text) !== 0
}

/**
 * Parses a list of IPs and CIDR ranges, comma-separated (`name` is the option, for the message).
 * Throws a one-line Error naming an entry that is neither, or one that covers a whole address family
 * (`0.0.0.0/0`, `::/0`): no per-address limit would then hold for anyone.
 */
export function parseAddressList(text: string, name = 'RELAY_RATE_ADDRESS_EXEMPT'): BlockList {
  const list = new BlockList()
  for (const raw of text.split(',')) {
    const entry = raw.trim()
    if (!entry) continue
    const [ip, bits] = entry.split('/')
    const family = isIP(ip)
    const prefix = bits === undefined ? null : Number(bits)
    const max = family === 4 ? 32 : 128
    if (family === 0 || (prefix !== null && (bits === '' || !Number.isInteger(prefix) || prefix < 0 || prefix > max))) {
      throw new Error(`${name}: "${entry}" is not an IP address or CIDR range`)
    }
    if (prefix === 0) throw new Error(`${name}: "${entry}" covers every address; name the addresses themselves`)
    const type = family === 4 ? 'ipv4' : 'ipv6'
    if (prefix === null) list.addAddress(ip, type)
    else list.addSubnet(ip, prefix, type)
  }
  return list
}

/** Whether `address` (an IP, possibly bracketed) is in `list`. */
export function inList(list: BlockList, address: string): boolean {
  const a = unbracket(address)
  const family = isIP(a)
  if (family === 0) return false
  return list.check(a, family === 4 ? 'ipv4' : 'ipv6')
}

/**
 * The key per-address limits count a request under, or null when it is not counted per address (an
 * exempt address, or an in-process caller without a socket). `trusted`: the proxies whose last
 * `X-Forwarded-For` entry names the client (null or empty: none).
 */
export function clientAddress(request: Request, socketAddress: string | null | undefined, trusted: BlockList | null, exempt?: BlockList): string | null {
  let address = socketAddress ?? null
  if (address && trusted && inList(trusted, address)) {
    // the entry the trusted proxy appended is the last one; entries before it come from the client
    const last = request.headers.get('x-forwarded-for')?.split(',').pop()?.trim()
    if (last && isPlainIp(last)) address = last
  }
  if (!address) return null
  // the operator's own machines: counted in the relay-wide budget only, like an in-process caller
  if (exempt && inList(exempt, address)) return null
  return addressKey(address)
}
