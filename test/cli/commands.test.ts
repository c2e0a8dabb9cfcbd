/**
 * The message, ACL and discovery commands through the built binary, against a stub relay that checks
 * each signature and answers with the shapes of docs/protocol.md §3–§5: the exact requests sent and the output.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { Server } from 'bun'
import { ed25519 } from '@noble/curves/ed25519.js'
import { rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { bodyHash, canonicalString } from '../../src/auth/canonical.ts'
import { encodeKeyFile, generateKeyPair } from '../../src/auth/sign.ts'
import { decodeBase64Url } from '../../src/lib/base64url.ts'
import { tempDir } from '../support/harness.ts'
import { buildBinary } from '../support/binary.ts'
import { runCli } from '../support/cli.ts'

const keys = generateKeyPair()
const me = keys.publicKey
const peer = generateKeyPair().publicKey
const MSG = 'msg_1795341600_a1b2c3d4e5f6'
const message = (id: string, body: unknown, extra: Record<string, unknown> = {}) => ({
  message_id: id,
  sender_key: peer,
  recipient_key: me,
  content_type: 'application/json',
  body,
  thread_id: 't-1',
  status: 'delivered',
  created_at: '2026-11-22T10:00:00.000Z',
  expires_at: '2026-11-29T10:00:00.000Z',
  delivered_at: '2026-11-22T10:00:05.000Z',
  ...extra,
})
const entry = { id: 7, owner_key: me, peer_key: peer, entry_type: 'block', created_at: '2026-11-22T10:00:00.000Z', updated_at: '2026-11-22T10:00:00.000Z' }

/** request line → [status, body]; the request target is matched exactly as sent (path and query). */
const ROUTES: Record<string, [number, unknown]> = {
  [`GET /v1/messages/${MSG}`]: [200, message(MSG, { text: 'hello', n: 1 }, { attachments: [{ blob_id: 'blob_abc', filename: 'report.pdf', content_type: 'application/pdf', size: 2048, hash: 'ab' }], in_reply_to: 'msg_1795341599_000000000000' })],
  [`GET /v1/messages/${MSG}/status`]: [200, { message_id: MSG, status: 'delivered', created_at: '2026-11-22T10:00:00.000Z', expires_at: '2026-11-29T10:00:00.000Z', delivered_at: '2026-11-22T10:00:05.000Z' }],
  'GET /v1/messages/msg_1_000000000000': [404, { error: { code: 'message_not_found', message: 'Message not found', details: null, request_id: 'req_stub000001' } }],
  'GET /v1/messages/threads/t-1?limit=1': [200, { messages: [message('msg_1795341600_000000000001', 'first')], has_more: true, next_cursor: 'c2' }],
  'GET /v1/messages/threads/t-1?limit=1&cursor=c2': [200, { messages: [message('msg_1795341601_000000000002', { text: 'second' })], has_more: false, next_cursor: null }],
  [`GET /v1/agents/${me}/acl?entry_type=block`]: [200, [entry]],
  [`GET /v1/agents/${me}/acl/${peer}`]: [200, entry],
  [`PUT /v1/agents/${me}/acl/${peer}`]: [201, entry],
  [`DELETE /v1/agents/${me}/acl/${peer}`]: [204, null],
  'GET /v1/capabilities?prefix=tr': [200, { capabilities: [{ tag: 'translate', agent_count: 3 }, { tag: 'travel', agent_count: 1 }] }],
  'GET /v1/discover?tag=nlp&tag=fr&q=translate+docs&limit=5': [200, { agents: [{ public_key: peer, display_name: 'Translator', last_active_at: '2026-11-22T09:59:00.000Z', capabilities: [{ name: 'translate' }, { name: 'summarize' }] }], has_more: false, next_cursor: null }],
}

let dir: string
let stub: Server<unknown>
const seen: { line: string; body: string }[] = []
beforeAll(async () => {
  await buildBinary()
  dir = tempDir('relay-cli-stub-')
  writeFileSync(join(dir, 'relay.key'), encodeKeyFile(keys), { mode: 0o600 })
  stub = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(req) {
      const url = new URL(req.url)
      const target = url.pathname + url.search
      const body = new Uint8Array(await req.arrayBuffer())
      const h = req.headers
      const canonical = canonicalString(req.method, target, h.get('x-m2m-timestamp') ?? '', bodyHash(body))
      const ok = h.get('x-m2m-public-key') === me && ed25519.verify(decodeBase64Url(h.get('x-m2m-signature') ?? '')!, new TextEncoder().encode(canonical), decodeBase64Url(me)!)
      if (!ok) return Response.json({ error: { code: 'invalid_signature', message: 'bad', details: null, request_id: 'req_bad' } }, { status: 401 })
      const line = `${req.method} ${target}`
      seen.push({ line, body: new TextDecoder().decode(body) })
      const route = ROUTES[line]
      if (!route) return Response.json({ error: { code: 'not_found', message: `stub has no ${line}`, details: null, request_id: 'req_stub404' } }, { status: 404 })
      const [status, json] = route
      return status === 204 ? new Response(null, { status }) : Response.json(json, { status, headers: { 'x-request-id': 'req_stub' } })
    },
  })
})
afterAll(() => {
  stub.stop(true)
  rmSync(dir, { recursive: true, force: true })
})

// these tests list the exact requests of each command: no publishing of the encryption declaration first
const cli = (...args: string[]) => runCli(args, { cwd: dir, env: { RELAY_URL: `http://127.0.0.1:${stub.port}`, RELAY_PUBLISH_ENCRYPTION: 'false' } })

describe('message commands', () => {
  test('get prints the envelope, attachments and the body; --json prints the message', async () => {
    const [text, json] = await Promise.all([cli('get', MSG), cli('get', MSG, '--json')])
    expect(text.stderr).toBe('')
    expect(text.stdout).toBe(
      [
        `message       ${MSG}`,
        `from          ${peer}`,
        `to            ${me}`,
        'status        delivered',
        'created       2026-11-22T10:00:00.000Z',
        'expires       2026-11-29T10:00:00.000Z',
        'delivered     2026-11-22T10:00:05.000Z',
        'thread        t-1',
        'in reply to   msg_1795341599_000000000000',
        'content type  application/json',
        'attachment  blob_abc  report.pdf  application/pdf  2.0 KiB',
        '',
        '{\n  "text": "hello",\n  "n": 1\n}',
        '',
      ].join('\n'),
    )
    expect(JSON.parse(json.stdout)).toEqual(ROUTES[`GET /v1/messages/${MSG}`][1] as object)
  })

  test('status', async () => {
    const r = await cli('status', MSG)
    expect(r.stdout).toContain('status     delivered\n')
    expect(JSON.parse((await cli('status', MSG, '--json')).stdout).delivered_at).toBe('2026-11-22T10:00:05.000Z')
  })

  test('an unknown message shows the code and request id', async () => {
    const r = await cli('get', 'msg_1_000000000000')
    expect(r.code).toBe(1)
    expect(r.stderr).toBe('relay: error: Message not found (code message_not_found, request req_stub000001)\n')
  })

  test('thread shows one page and how to continue; --all follows every cursor', async () => {
    const one = await cli('thread', 't-1', '--limit', '1')
    expect(one.stdout.split('\n')[0]).toMatch(/^CREATED\s+FROM\s+TO\s+STATUS\s+MESSAGE\s+BODY$/)
    expect(one.stdout).toContain('me')
    expect(one.stdout).toContain('first')
    expect(one.stderr).toBe('more: relay thread t-1 --cursor c2\n')
    const all = JSON.parse((await cli('thread', 't-1', '--limit', '1', '--all', '--json')).stdout)
    expect(all.messages.map((m: any) => m.message_id)).toEqual(['msg_1795341600_000000000001', 'msg_1795341601_000000000002'])
    expect(all.has_more).toBe(false)
    expect(all.next_cursor).toBeNull()
  })
})

describe('acl, discover, capabilities', () => {
  test('acl list, get, set and delete send the docs/protocol.md §5 requests', async () => {
    seen.length = 0
    const list = await cli('acl', 'list', '--type', 'block')
    expect(list.stdout).toMatch(new RegExp(`^PEER\\s+TYPE\\s+CREATED\\n${peer}\\s+block\\s+2026-11-22T10:00:00.000Z\\n$`))
    expect((await cli('acl', 'get', peer)).stdout).toContain(`peer     ${peer}\ntype     block\n`)
    expect((await cli('acl', 'set', peer, 'block')).stdout).toBe(`created: block ${peer}\n`)
    expect((await cli('acl', 'delete', peer)).stdout).toBe(`deleted: ${peer}\n`)
    expect(JSON.parse((await cli('acl', 'delete', peer, '--json')).stdout)).toEqual({ deleted: true, peer_key: peer })
    expect(seen.map((s) => s.line)).toEqual([
      `GET /v1/agents/${me}/acl?entry_type=block`,
      `GET /v1/agents/${me}/acl/${peer}`,
      `PUT /v1/agents/${me}/acl/${peer}`,
      `DELETE /v1/agents/${me}/acl/${peer}`,
      `DELETE /v1/agents/${me}/acl/${peer}`,
    ])
    expect(JSON.parse(seen[2].body)).toEqual({ entry_type: 'block' })
  })

  test('discover with repeated tags, text and a limit', async () => {
    const r = await cli('discover', '--tag', 'nlp', '--tag', 'fr', '--q', 'translate docs', '--limit', '5')
    expect(r.stderr).toBe('')
    expect(r.stdout).toMatch(new RegExp(`^PUBLIC KEY\\s+NAME\\s+LAST ACTIVE\\s+CAPABILITIES\\n${peer}\\s+Translator\\s+2026-11-22T09:59:00.000Z\\s+translate, summarize\\n$`))
    const j = JSON.parse((await cli('discover', '--tag', 'nlp,fr', '--q', 'translate docs', '--limit', '5', '--json')).stdout)
    expect(j.agents[0].public_key).toBe(peer)
  })

  test('capabilities', async () => {
    const r = await cli('capabilities', '--prefix', 'tr')
    expect(r.stdout).toMatch(/^TAG\s+AGENTS\ntranslate\s+3\ntravel\s+1\n$/)
    expect(JSON.parse((await cli('capabilities', '--prefix', 'tr', '--json')).stdout).capabilities).toHaveLength(2)
  })
})
