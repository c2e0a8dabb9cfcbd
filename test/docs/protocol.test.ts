/**
 * docs/protocol.md, the protocol reference users read: its worked examples are computed from the test
 * vectors by the relay's own signing code, its error table from src/errors.ts, and every
 * "docs/protocol.md §N" citation anywhere in the repository points at a section that exists.
 * `UPDATE_DOCS=1 bun test test/docs` rewrites the generated parts.
 */
import { describe, expect, test } from 'bun:test'
import { createHmac } from 'node:crypto'
import { readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { bodyHash, canonicalString } from '../../src/auth/canonical.ts'
import { keyPairFromSeed, signRequest, signWsAuth } from '../../src/auth/sign.ts'
import { ERROR_STATUS } from '../../src/errors.ts'
import vectors from '../fixtures/test-vectors.json'
import { ROOT } from '../support/binary.ts'
import { renderErrors, replaceSection, sectionOf } from '../support/readme.ts'

const PROTOCOL = join(ROOT, 'docs', 'protocol.md')

const code = (s: string) => `\`${s}\``
const fence = (lang: string, text: string) => ['```' + lang, text, '```']

/** The worked examples, each value derived here from the seed and inputs of the test vectors. */
function renderVectors(): string {
  const out: string[] = []
  for (const [i, v] of vectors.requests.entries()) {
    const keys = keyPairFromSeed(Buffer.from(v.private_seed_hex, 'hex'))
    const hash = bodyHash(v.body)
    const canonical = canonicalString(v.method, v.path, v.timestamp, hash)
    const h = signRequest(keys, v.method, v.path, v.body, v.timestamp)
    out.push(
      `### Request ${i + 1}: ${v.name}`,
      '',
      '| Input | Value |',
      '|---|---|',
      `| private key (32-byte seed, hex) | ${code(v.private_seed_hex)} |`,
      `| public key | ${code(keys.publicKey)} |`,
      `| method and target | ${code(`${v.method} ${v.path}`)} |`,
      `| timestamp | ${code(v.timestamp)} |`,
      `| body (exact bytes) | ${v.body === '' ? '(empty)' : code(v.body)} |`,
      `| body hash | ${code(hash)} |`,
      '',
      'Canonical string (lines joined by `\\n`, no newline at the end):',
      '',
      ...fence('text', canonical),
      '',
      'Request as sent:',
      '',
      ...fence('http', [`${v.method} ${v.path} HTTP/1.1`, ...Object.entries(h).map(([k, x]) => `${k}: ${x}`), ...(v.body ? ['Content-Type: application/json', '', v.body] : [])].join('\n')),
      '',
    )
  }
  const ws = vectors.websocket
  const wsKeys = keyPairFromSeed(Buffer.from(ws.private_seed_hex, 'hex'))
  const frame = signWsAuth(wsKeys, ws.frame.timestamp)
  out.push(
    '### WebSocket authentication',
    '',
    `Key 1 (${code(wsKeys.publicKey)}) at ${code(ws.frame.timestamp)} signs the canonical string`,
    '',
    ...fence('text', `WS\n${ws.frame.timestamp}`),
    '',
    'and sends this first frame:',
    '',
    ...fence('json', JSON.stringify(frame)),
    '',
  )
  const hook = vectors.webhook
  const key = Buffer.from(hook.secret, 'base64url')
  out.push(
    '### Webhook signature',
    '',
    `A webhook registered with the secret ${code(hook.secret)} (the 32 bytes ${code(key.toString('hex'))}) receives this body:`,
    '',
    ...fence('json', hook.raw_body),
    '',
    `with ${code(`X-M2M-Webhook-Signature: ${createHmac('sha256', key).update(hook.raw_body).digest('hex')}`)}, the hex HMAC-SHA256 of exactly those bytes. With OpenSSL:`,
    '',
    ...fence('sh', `printf '%s' "$BODY" | openssl dgst -sha256 -mac HMAC -macopt hexkey:${key.toString('hex')}`),
  )
  return out.join('\n')
}

const SECTIONS: Record<string, () => string> = { errors: renderErrors, 'protocol-vectors': renderVectors }

/** Files where a "docs/protocol.md §N" citation may appear. */
function* sourceFiles(dir: string): Generator<string> {
  for (const name of readdirSync(dir)) {
    if (['node_modules', 'dist', '.git', 'test-artifacts', 'data'].includes(name)) continue
    const path = join(dir, name)
    if (statSync(path).isDirectory()) yield* sourceFiles(path)
    else if (/\.(ts|md|json|service|conf|toml)$|Caddyfile$/.test(name)) yield path
  }
}

describe('docs/protocol.md', () => {
  let text = readFileSync(PROTOCOL, 'utf8')

  test('generated parts match what the code renders (UPDATE_DOCS=1 rewrites them)', () => {
    if (process.env.UPDATE_DOCS === '1') {
      for (const [name, render] of Object.entries(SECTIONS)) text = replaceSection(text, name, render())
      writeFileSync(PROTOCOL, text)
    }
    for (const [name, render] of Object.entries(SECTIONS)) expect([name, sectionOf(text, name)]).toEqual([name, render()])
  })

  test('the worked examples show every value of the test vectors', () => {
    const section = sectionOf(text, 'protocol-vectors') ?? ''
    for (const v of vectors.requests) {
      for (const value of [v.private_seed_hex, v.public_key, v.path, v.timestamp, v.body_hash, v.canonical_string, v.signature]) expect(section).toContain(value)
    }
    expect(section).toContain(vectors.websocket.frame.signature)
    expect(section).toContain(vectors.webhook.signature_header)
    expect(section).toContain(vectors.webhook.hmac_key_hex)
  })

  test('every error code is explained', () => {
    for (const c of Object.keys(ERROR_STATUS)) expect([c, text.includes(`\`${c}\``)]).toEqual([c, true])
  })

  test('sections 1 to 13 exist, and every "docs/protocol.md §N" citation in the repository points at one', () => {
    const headings = new Set([...text.matchAll(/^#{2,3} (\d+(?:\.\d+)?)\.? /gm)].map((m) => m[1]))
    for (let n = 1; n <= 13; n++) expect(headings.has(String(n))).toBe(true)
    const bad: string[] = []
    for (const file of sourceFiles(ROOT)) {
      const content = readFileSync(file, 'utf8')
      for (const m of content.matchAll(/docs\/protocol\.md §(\d+(?:\.\d+)?)/g)) if (!headings.has(m[1])) bad.push(`${file}: §${m[1]}`)
    }
    expect(bad).toEqual([])
  })
})
