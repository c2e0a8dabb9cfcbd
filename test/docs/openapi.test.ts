/**
 * /v1/openapi.json: passes the Redocly linter (recommended rules, offline), documents every operation
 * with its success and error responses in the error envelope, marks health public, describes the
 * webhook delivery and the WebSocket frames, and shows realistic header values.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createConfig, lintFromString } from '@redocly/openapi-core'
import { keyPairFromSeed, signRequest } from '../../src/auth/sign.ts'
import { ERROR_STATUS } from '../../src/errors.ts'
import { EXAMPLE } from '../../src/http/openapi-document.ts'
import { ROUTE_ERRORS, SIGNED_ERRORS } from '../../src/http/openapi-docs.ts'
import vectors from '../fixtures/test-vectors.json'
import { BASE_URL, startTestRelay, type TestRelay } from '../support/harness.ts'

let t: TestRelay
let doc: any
let text: string
beforeAll(async () => {
  t = await startTestRelay()
  const res = await t.handle(new Request(`${BASE_URL}/v1/openapi.json`))
  expect(res.status).toBe(200)
  text = await res.text()
  doc = JSON.parse(text)
})
afterAll(() => t.close())

const METHODS = ['get', 'put', 'post', 'delete', 'patch']
const operations = () =>
  Object.entries<any>(doc.paths).flatMap(([path, item]) => METHODS.filter((m) => item[m]).map((m) => ({ key: `${m} ${path}`, path, method: m, op: item[m] })))

/**
 * Warnings the recommended rules raise that the contract makes right: health answers cannot fail with
 * a 4xx, a WebSocket upgrade answers 101 (no 2xx), the WebSocket frames are schemas no HTTP operation
 * references, and /v1/messages/threads/{threadID} beside /v1/messages/{messageID}/status is fixed by the
 * protocol (the literal "threads" segment wins).
 */
const ACCEPTED_WARNINGS = [
  /^operation-4xx-response #\/paths\/~1v1~1health/,
  /^operation-2xx-response #\/paths\/~1v1~1ws\/get\/responses /,
  /^no-unused-components #\/components\/schemas\/Ws[A-Za-z]+Frame /,
  /^no-ambiguous-paths #\/paths\/~1v1~1messages~1\{messageID\}~1status /,
]

describe('/v1/openapi.json', () => {
  test('passes the Redocly linter (recommended rules): no error, only the warnings explained above', async () => {
    const config = await createConfig({ extends: ['recommended'] } as never)
    const problems = await lintFromString({ source: text, absoluteRef: '/openapi.json', config })
    const found = problems.map((p) => `${p.ruleId} ${p.location?.[0]?.pointer ?? ''} (${p.severity}: ${p.message})`)
    expect(problems.filter((p) => p.severity === 'error').map((p) => `${p.ruleId}: ${p.message}`)).toEqual([])
    expect(found.filter((f) => !ACCEPTED_WARNINGS.some((re) => re.test(f)))).toEqual([])
  })

  test('is OpenAPI 3.1 with servers, tags, a license and no literal "\\n" or internal references in its text', () => {
    expect(doc.openapi).toMatch(/^3\.1\./)
    expect(Array.isArray(doc.servers)).toBe(true)
    expect(doc.servers.length).toBeGreaterThan(0)
    expect(doc.info.license.identifier).toBe('MIT')
    expect(text).not.toContain('\\\\n') // a backslash-n inside a JSON string is a literal "\n" on the page
    expect(text).not.toContain('SPEC')
    expect(text).not.toContain('YOUR_SECRET_TOKEN')
    expect(doc.info.description).toContain('docs/protocol.md')
  })

  test('every operation has an entry in the error table, an operationId, a success response and its error codes', () => {
    for (const { key, op } of operations()) {
      const entry = ROUTE_ERRORS[key]
      expect([key, entry !== undefined]).toEqual([key, true])
      expect(op.operationId).toBe(entry.id)
      const statuses = Object.keys(op.responses)
      expect([key, statuses.some((s) => /^(1|2)\d\d$/.test(s))]).toEqual([key, true])
      const codes = entry.public ? entry.errors : [...entry.errors, ...SIGNED_ERRORS]
      for (const code of codes) {
        const response = op.responses[String(ERROR_STATUS[code])]
        const media = response?.content?.['application/json']
        expect([key, code, media?.schema?.$ref]).toEqual([key, code, '#/components/schemas/ErrorEnvelope'])
        expect(media.examples[code].value.error.code).toBe(code)
        expect(response.description).toContain(`\`${code}\``)
      }
    }
  })

  test('health routes are public (security: []) and describe their answers', () => {
    for (const path of ['/v1/health', '/v1/health/ready', '/v1/health/details']) {
      const op = doc.paths[path].get
      expect(op.security).toEqual([])
      expect(op.responses['200'].content['application/json'].schema).toBeDefined()
    }
    expect(doc.paths['/v1/health/ready'].get.responses['503']).toBeDefined()
    expect(doc.security).toEqual([{ publicKey: [], timestamp: [], signature: [] }])
  })

  test('the security schemes explain signing; the example values are the worked example, re-derived', () => {
    const schemes = doc.components.securitySchemes
    expect(Object.values<any>(schemes).map((s) => s.name)).toEqual(['X-M2M-Public-Key', 'X-M2M-Timestamp', 'X-M2M-Signature'])
    for (const s of Object.values<any>(schemes)) expect(s.description.length).toBeGreaterThan(40)
    expect(schemes.signature.description).toContain('BODY_HASH')
    const v = vectors.requests[0]
    const keys = keyPairFromSeed(Buffer.from(v.private_seed_hex, 'hex'))
    expect(`${v.method} ${v.path}`).toBe(EXAMPLE.request)
    expect(signRequest(keys, v.method, v.path, v.body, EXAMPLE.timestamp)).toEqual({
      'X-M2M-Public-Key': EXAMPLE.publicKey,
      'X-M2M-Timestamp': EXAMPLE.timestamp,
      'X-M2M-Signature': EXAMPLE.signature,
    })
    expect(doc.info.description).toContain(EXAMPLE.signature)
  })

  test('the webhook delivery is an OpenAPI 3.1 webhook with its headers and body', () => {
    const post = doc.webhooks.message.post
    expect(post.parameters.map((p: any) => p.name)).toEqual(['X-M2M-Webhook-Signature', 'X-M2M-Webhook-Timestamp', 'X-M2M-Delivery-ID'])
    expect(post.parameters[0].schema.example).toBe(vectors.webhook.signature_header)
    const body = doc.components.schemas.WebhookDelivery
    expect(body.required).toEqual(['delivery_id', 'message'])
    expect(Object.keys(body.properties.message.properties)).not.toContain('status')
  })

  test('the WebSocket operation names each frame, and each frame has a schema', () => {
    const description: string = doc.paths['/v1/ws'].get.description
    const frames = Object.keys(doc.components.schemas).filter((n) => /^Ws.*Frame$/.test(n))
    expect(frames.length).toBeGreaterThanOrEqual(9)
    for (const name of frames.filter((n) => n !== 'WsAuthResultFrame' && n !== 'WsPongFrame')) expect([name, description.includes(name)]).toEqual([name, true])
    expect(doc.components.schemas.WsAuthFrame.properties.type.const).toBe('auth')
  })

  test('what the relay answers an unsigned request is among the documented responses of each operation', async () => {
    for (const { key, path, method, op } of operations()) {
      const url = BASE_URL + path.replace(/\{[^}]+\}/g, 'PUAXw-hDiVqStwqnTRt-vJyYLM8uxJaMwM1V8Sr0Zgw')
      const res = await t.handle(new Request(url, { method: method.toUpperCase() }))
      const documented = op.responses[String(res.status)]
      expect([key, res.status, documented !== undefined]).toEqual([key, res.status, true])
      if (res.status >= 400 && !ROUTE_ERRORS[key].public) {
        const { error } = (await res.json()) as { error: { code: string } }
        expect([key, documented.description.includes(`\`${error.code}\``)]).toEqual([key, true])
      }
    }
  })
})
