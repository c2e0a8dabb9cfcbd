/**
 * The generated parts of README.md, rendered from the code: the configuration table (src/config/options.ts),
 * the signing worked example (src/auth + test/fixtures/test-vectors.json), the error table
 * (src/errors.ts), the metrics (src/metrics/catalog.ts and a live scrape) and the agent command
 * reference (src/cli/commands). test/docs/readme.test.ts checks README.md against them;
 * `UPDATE_README=1 bun test test/docs` rewrites them in place.
 */
import { bodyHash, canonicalString } from '../../src/auth/canonical.ts'
import { keyPairFromSeed, signRequest } from '../../src/auth/sign.ts'
import { GLOBAL_FLAGS, usageLine } from '../../src/cli/client-cli.ts'
import { CLIENT_COMMANDS } from '../../src/cli/commands/index.ts'
import { OPTIONS } from '../../src/config/options.ts'
import { ERROR_STATUS, type ErrorCode } from '../../src/errors.ts'
import { METRICS } from '../../src/metrics/catalog.ts'
import vectors from '../fixtures/test-vectors.json'
import { BASE_URL, startTestRelay } from './harness.ts'
import { parsePrometheus } from './prometheus.ts'

export const README_PATH = new URL('../../README.md', import.meta.url).pathname

const esc = (s: string) => s.replace(/\|/g, '\\|')

export function renderOptions(): string {
  const rows = OPTIONS.map(
    (o) => `| \`${o.env}\` | \`${o.key}\` | ${o.flag ? `\`${o.flag}\`` : ''} | ${o.default === null ? '(unset)' : `\`${o.default}\``} | ${esc(o.why)} |`,
  )
  return ['| Environment | relay.config.ts | Flag | Default | Why |', '|---|---|---|---|---|', ...rows].join('\n')
}

/** The first request of the test vectors, signed here by the relay's own code. */
export function renderSigningExample(): string {
  const v = vectors.requests[0]
  const keys = keyPairFromSeed(Buffer.from(v.private_seed_hex, 'hex'))
  const hash = bodyHash(v.body)
  const canonical = canonicalString(v.method, v.path, v.timestamp, hash)
  const headers = signRequest(keys, v.method, v.path, v.body, v.timestamp)
  const post = vectors.requests[1]
  const postHeaders = signRequest(keyPairFromSeed(Buffer.from(post.private_seed_hex, 'hex')), post.method, post.path, post.body, post.timestamp)
  return [
    '| Input | Value |',
    '|---|---|',
    `| private key (32-byte seed, hex) | \`${v.private_seed_hex}\` |`,
    `| public key (base64url) | \`${keys.publicKey}\` |`,
    `| method | \`${v.method}\` |`,
    `| path with query | \`${v.path}\` |`,
    `| timestamp | \`${v.timestamp}\` |`,
    `| body | ${v.body === '' ? '(empty)' : `\`${v.body}\``} |`,
    '',
    `Body hash (SHA-256 of the empty body, unpadded base64url): \`${hash}\``,
    '',
    'Canonical string (four lines joined by `\\n`, no newline at the end):',
    '',
    '```text',
    canonical,
    '```',
    '',
    'Headers sent:',
    '',
    '```http',
    `${v.method} ${v.path} HTTP/1.1`,
    `X-M2M-Public-Key: ${headers['X-M2M-Public-Key']}`,
    `X-M2M-Timestamp: ${headers['X-M2M-Timestamp']}`,
    `X-M2M-Signature: ${headers['X-M2M-Signature']}`,
    '```',
    '',
    `With a body the hash changes and nothing else: \`${post.method} ${post.path}\` at \`${post.timestamp}\` with the body`,
    `\`${post.body}\` (exact bytes) hashes to \`${bodyHash(post.body)}\` and is signed`,
    `\`${postHeaders['X-M2M-Signature']}\`.`,
  ].join('\n')
}

/** When each docs/protocol.md §11 code is returned; a code without an entry fails the README test. */
const WHEN: Record<ErrorCode, string> = {
  bad_request: 'malformed JSON, wrong types, out-of-range values, unknown query parameters (`details` names the fields)',
  unauthorized: 'authentication headers missing or malformed',
  invalid_signature: 'the signature does not verify (wrong key, or the method, path, query, timestamp or body differ from what was signed)',
  timestamp_expired: 'the timestamp is outside the window (±300 s by default)',
  forbidden: "not allowed: someone else's resource, or a suspended recipient",
  agent_suspended: 'the caller is suspended by the operator',
  acl_denied: "the recipient's inbox policy or ACL refuses the sender",
  not_found: 'unknown route or method, ACL entry or webhook',
  agent_not_found: 'profile lookups only (never when sending)',
  message_not_found: 'unknown message, or one you neither sent nor received',
  blob_not_found: 'unknown blob, or one you may not read',
  request_timeout: 'the request body did not arrive within the body deadline (30 s by default), or arrived slower than 8 KiB/s (a blob upload has no deadline, only this rate)',
  replay_detected: 'this signature was already used (sign every request afresh)',
  blob_referenced: 'the blob is still attached to an unexpired message',
  payload_too_large: 'body over 1 MiB, request over 2 MiB, blob over 100 MiB',
  unprocessable_entity: 'well-formed but semantically invalid (no body and no attachments, unusable blob, too many ACL entries, private webhook target)',
  encryption_required: 'a plaintext send to an agent whose profile asks for encrypted messages only, or to any agent when the relay runs with `RELAY_REQUIRE_ENCRYPTION`',
  rate_limit_exceeded: 'over the per-minute limit, or too much unauthenticated traffic (or too many uploads in progress) from your address; wait `Retry-After` seconds',
  internal_error: 'unexpected failure, logged by the relay with the request id',
  service_unavailable: 'the relay cannot serve right now (shutting down, or too much unauthenticated traffic or too many uploads in progress over all clients); wait `Retry-After` seconds if given',
  insufficient_storage: 'blob quota exceeded',
  range_not_satisfiable: 'blob downloads: the `Range` selects no byte of the blob (`Content-Range: bytes */SIZE` gives its size)',
}

export function renderErrors(): string {
  const rows = (Object.entries(ERROR_STATUS) as [ErrorCode, number][]).map(([code, status]) => {
    if (!WHEN[code]) throw new Error(`README error table: no description for ${code}`)
    return `| ${status} | \`${code}\` | ${esc(WHEN[code])} |`
  })
  return ['| HTTP | code | When |', '|---|---|---|', ...rows].join('\n')
}

/** Every metric a relay exposes today (scraped) plus those the catalog reserves for its features. */
export async function renderMetrics(): Promise<string> {
  const t = await startTestRelay({ metrics: { enabled: true, addr: null } })
  await t.handle(new Request(BASE_URL + '/v1/health'))
  await t.relay.scheduler.runNow('prune-replay-cache')
  const fams = parsePrometheus(await (await t.handle(new Request(BASE_URL + '/metrics'))).text())
  await t.close()
  const rows = new Map<string, { type: string; labels: string; help: string }>()
  for (const f of fams.values()) {
    const labels = new Set(f.samples.flatMap((s) => Object.keys(s.labels)).filter((l) => l !== 'le'))
    rows.set(f.name, { type: f.type, labels: [...labels].join(', '), help: f.help })
  }
  for (const m of Object.values(METRICS)) {
    const row = rows.get(m.name)
    if (row) row.labels = m.labelNames.join(', ')
    else rows.set(m.name, { type: m.type, labels: m.labelNames.join(', '), help: m.help })
  }
  return [
    '| Metric | Type | Labels | Meaning |',
    '|---|---|---|---|',
    ...[...rows].map(([name, r]) => `| \`${name}\` | ${r.type} | ${r.labels} | ${esc(r.help)} |`),
  ].join('\n')
}

export function renderCliReference(): string {
  const out: string[] = []
  out.push('Global flags of every agent command:', '')
  for (const f of GLOBAL_FLAGS) out.push(`- \`--${f.name}${f.value ? ` ${f.value}` : ''}\`: ${f.help}`)
  for (const c of CLIENT_COMMANDS) {
    out.push('', `#### \`${usageLine(c)}\``, '', `${c.summary[0].toUpperCase()}${c.summary.slice(1)}.${c.description ? ` ${c.description.replace(/\n/g, ' ')}` : ''}`)
    if (c.flags?.length) {
      out.push('')
      for (const f of c.flags) out.push(`- \`--${f.name}${f.value ? ` ${f.value}` : ''}\`: ${f.help}${f.repeatable ? ' (repeatable)' : ''}`)
    }
  }
  return out.join('\n')
}

export const SECTIONS: Record<string, () => string | Promise<string>> = {
  options: renderOptions,
  'signing-example': renderSigningExample,
  errors: renderErrors,
  metrics: renderMetrics,
  'cli-reference': renderCliReference,
}

const marker = (name: string) => new RegExp(`(<!-- generated:${name} -->\\n)([\\s\\S]*?)(\\n<!-- /generated:${name} -->)`)

/** The text between the markers of a generated section, or undefined when the markers are missing. */
export function sectionOf(readme: string, name: string): string | undefined {
  return marker(name).exec(readme)?.[2]
}

export function replaceSection(readme: string, name: string, body: string): string {
  if (!marker(name).test(readme)) throw new Error(`README.md has no <!-- generated:${name} --> markers`)
  return readme.replace(marker(name), (_m, a, _b, c) => `${a}${body}${c}`)
}

/** Fenced code blocks that follow `<!-- snippet:NAME -->`. */
export function snippet(readme: string, name: string): string {
  const m = new RegExp(`<!-- snippet:${name} -->\\n\`\`\`[a-z]*\\n([\\s\\S]*?)\\n\`\`\``).exec(readme)
  if (!m) throw new Error(`README.md has no snippet ${name}`)
  return m[1]
}
