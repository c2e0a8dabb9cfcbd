/**
 * Which webhook targets the relay refuses unless the operator allows private targets (docs/protocol.md §9):
 * loopback, private, link-local, CGNAT, multicast, unspecified, documentation and reserved ranges, in
 * IPv4 and IPv6 — every range of the IANA special-purpose address registries that is not globally
 * reachable — including IPv6 forms that embed an IPv4 address (mapped, compatible, translated, NAT64,
 * 6to4), and `localhost` names (RFC 6761: they always mean this host, whatever a resolver says).
 */
import { isIP } from 'node:net'
import { parseV4, parseV6 } from '../lib/ip.ts'

/** Said with every refusal, so that a home-lab operator knows the switch. */
export const PRIVATE_TARGETS_HINT = 'an operator can allow such targets with RELAY_WEBHOOK_ALLOW_PRIVATE_TARGETS=true'

/** IPv4 ranges as [first octets as a 32-bit number, prefix length, what it is]. */
const V4_BLOCKED: [number, number, string][] = [
  [0x00000000, 8, 'unspecified'], // 0.0.0.0/8, "this network"
  [0x0a000000, 8, 'private'], // 10/8
  [0x64400000, 10, 'CGNAT'], // 100.64/10
  [0x7f000000, 8, 'loopback'], // 127/8
  [0xa9fe0000, 16, 'link-local'], // 169.254/16
  [0xac100000, 12, 'private'], // 172.16/12
  [0xc0000000, 24, 'reserved'], // 192.0.0/24, IETF protocol assignments
  [0xc0000200, 24, 'documentation'], // 192.0.2/24, TEST-NET-1
  [0xc0586300, 24, 'reserved'], // 192.88.99/24, deprecated 6to4 relay anycast
  [0xc0a80000, 16, 'private'], // 192.168/16
  [0xc6120000, 15, 'reserved'], // 198.18/15, benchmarking
  [0xc6336400, 24, 'documentation'], // 198.51.100/24, TEST-NET-2
  [0xcb007100, 24, 'documentation'], // 203.0.113/24, TEST-NET-3
  [0xe0000000, 4, 'multicast'], // 224/4
  [0xf0000000, 4, 'reserved'], // 240/4, including 255.255.255.255
]

function classifyV4(n: number): string | null {
  for (const [base, bits, kind] of V4_BLOCKED) {
    const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0
    if ((n & mask) >>> 0 === base) return kind
  }
  return null
}

function classifyV6(g: number[]): string | null {
  const embedded = (hi: number, lo: number) => classifyV4(((hi << 16) >>> 0) + lo)
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0)
  if (zeros(0, 8)) return 'unspecified'
  if (zeros(0, 7) && g[7] === 1) return 'loopback'
  if (zeros(0, 5) && g[5] === 0xffff) return embedded(g[6], g[7]) ?? null // IPv4-mapped ::ffff:a.b.c.d
  if (zeros(0, 4) && g[4] === 0xffff && g[5] === 0) return embedded(g[6], g[7]) ?? null // IPv4-translated
  if (zeros(0, 6)) return embedded(g[6], g[7]) ?? 'reserved' // IPv4-compatible ::a.b.c.d (deprecated)
  if (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)) return embedded(g[6], g[7]) // NAT64 64:ff9b::/96
  if (g[0] === 0x64 && g[1] === 0xff9b && g[2] === 1) return 'reserved' // 64:ff9b:1::/48, local-use NAT64
  if (g[0] === 0x100 && zeros(1, 4)) return 'reserved' // 100::/64, discard-only
  if (g[0] === 0x2001 && g[1] < 0x200) return 'reserved' // 2001::/23, IETF protocol assignments (Teredo, benchmarking, ORCHID…)
  if (g[0] === 0x2001 && g[1] === 0xdb8) return 'documentation' // 2001:db8::/32
  if (g[0] === 0x2002) return embedded(g[1], g[2]) // 6to4 2002:AABB:CCDD::/48
  if ((g[0] & 0xfff0) === 0x3ff0) return 'documentation' // 3fff::/20
  if (g[0] === 0x5f00) return 'reserved' // 5f00::/16, SRv6 SIDs
  if ((g[0] & 0xffc0) === 0xfe80) return 'link-local' // fe80::/10
  if ((g[0] & 0xffc0) === 0xfec0) return 'private' // fec0::/10, deprecated site-local
  if ((g[0] & 0xfe00) === 0xfc00) return 'private' // fc00::/7, unique local
  if ((g[0] & 0xff00) === 0xff00) return 'multicast' // ff00::/8
  return null
}

/**
 * Why an IP address may not be a webhook target ("loopback", "private", …), or null when it may.
 * Anything that is not an IP address is refused as "invalid".
 */
export function blockedAddressKind(address: string): string | null {
  const ip = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address
  const family = isIP(ip)
  if (family === 4) {
    const n = parseV4(ip)
    return n === null ? 'invalid' : classifyV4(n)
  }
  if (family === 6) {
    const groups = parseV6(ip)
    return groups === null ? 'invalid' : classifyV6(groups)
  }
  return 'invalid'
}

/** True for an IP literal (IPv4, or IPv6 with or without brackets). */
export function isIpLiteral(host: string): boolean {
  const ip = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host
  return isIP(ip) !== 0
}

/** Loopback names that hosts files commonly define besides `localhost` (Debian, Fedora, macOS). */
const LOOPBACK_NAMES = new Set(['localhost', 'localhost.localdomain', 'localhost4', 'localhost4.localdomain4', 'localhost6', 'localhost6.localdomain6', 'ip6-localhost', 'ip6-loopback'])

/**
 * `localhost` and names under `.localhost` (RFC 6761), and the other loopback names of common hosts
 * files (`ip6-localhost`, `localhost.localdomain`, …), any case, with or without a trailing dot.
 */
export function isLocalhostName(host: string): boolean {
  const h = host.toLowerCase().replace(/\.$/, '')
  return LOOPBACK_NAMES.has(h) || h.endsWith('.localhost')
}
