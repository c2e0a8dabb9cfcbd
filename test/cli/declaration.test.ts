/**
 * Publishing the encryption declaration: the client does it before its first signed request when asked
 * (`encryption.publish`), keeping the rest of the metadata and leaving any existing `encryption` entry
 * alone; the command-line client does it by default and remembers it in KEYFILE.declared, so later
 * commands make no extra request. Counted on a real relay behind a real socket.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { generateKeyPair, encodeKeyFile } from '../../src/client/index.ts'
import { RelayClient } from '../../src/client/index.ts'
import { runClientCommand } from '../../src/cli/client-cli.ts'
import { FakeClock } from '../../src/lib/clock.ts'
import { captureIo } from '../support/cli.ts'
import { startTestRelay, tempDir, type TestRelay } from '../support/harness.ts'

let t: TestRelay
let server: ReturnType<typeof Bun.serve>
let url: string
let dir: string
let log: string[] = []

beforeAll(async () => {
  t = await startTestRelay({}, { clock: new FakeClock(Date.now()) })
  server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    fetch: (req) => {
      const u = new URL(req.url)
      log.push(`${req.method} ${u.pathname}`)
      return t.relay.handle(req)
    },
  })
  url = `http://127.0.0.1:${server.port}`
  dir = tempDir('relay-declare-')
})
afterAll(async () => {
  server?.stop(true)
  await t?.close()
  rmSync(dir, { recursive: true, force: true })
})

const profileCalls = (key: string) => log.filter((l) => l.endsWith(`/v1/agents/${key}`))

async function metadataOf(key: string): Promise<Record<string, unknown>> {
  const reader = t.client()
  return ((await reader.getAgent(key)).metadata ?? {}) as Record<string, unknown>
}

describe('client: encryption.publish', () => {
  test('off by default: a client never writes the profile on its own', async () => {
    const c = new RelayClient({ baseUrl: url, keys: generateKeyPair() })
    log = []
    await c.poll()
    expect(profileCalls(c.publicKey)).toEqual([])
    expect(await metadataOf(c.publicKey)).toEqual({})
  })

  test('publishes once before the first request, keeping the other metadata', async () => {
    const keys = generateKeyPair()
    await new RelayClient({ baseUrl: url, keys }).updateProfile({ metadata: { team: 'ops' } })
    const c = new RelayClient({ baseUrl: url, keys, encryption: { publish: true } })
    log = []
    await Promise.all([c.poll(), c.poll()])
    await c.poll()
    expect(profileCalls(keys.publicKey)).toEqual([`GET /v1/agents/${keys.publicKey}`, `PATCH /v1/agents/${keys.publicKey}`])
    // the declaration comes before the first request the caller made
    expect(log.indexOf(`PATCH /v1/agents/${keys.publicKey}`)).toBeLessThan(log.indexOf('GET /v1/messages'))
    expect(await metadataOf(keys.publicKey)).toEqual({ team: 'ops', encryption: { versions: [3, 2], require: false } })
    expect(await c.ensureEncryptionDeclared()).toBe('published')
  })

  test('an existing entry of any shape is left alone; a memory skips the read', async () => {
    const keys = generateKeyPair()
    const optedOut = { team: 'x', encryption: { versions: [], require: false } }
    await new RelayClient({ baseUrl: url, keys }).updateProfile({ metadata: optedOut })
    const seen: string[] = []
    const memory = { has: (u: string, k: string) => seen.includes(`${u} ${k}`), remember: (u: string, k: string) => void seen.push(`${u} ${k}`) }
    log = []
    expect(await new RelayClient({ baseUrl: url, keys, encryption: { publish: memory } }).ensureEncryptionDeclared()).toBe('present')
    expect(seen).toEqual([`${url} ${keys.publicKey}`])
    expect(await new RelayClient({ baseUrl: url, keys, encryption: { publish: memory } }).ensureEncryptionDeclared()).toBe('remembered')
    expect(profileCalls(keys.publicKey)).toEqual([`GET /v1/agents/${keys.publicKey}`])
    expect(await metadataOf(keys.publicKey)).toEqual(optedOut)
  })

  test('a failed publish does not fail the request, and is tried again by the next client', async () => {
    const keys = generateKeyPair()
    const memory = { has: () => false, remember: () => {} }
    const failing = new RelayClient({ baseUrl: url, keys, encryption: { publish: memory }, fetch: (req) => (new URL(req.url).pathname.startsWith('/v1/agents/') ? Promise.resolve(new Response('no', { status: 502 })) : fetch(req)) })
    expect((await failing.poll()).messages).toEqual([])
    expect(await metadataOf(keys.publicKey)).toEqual({})
    expect(await new RelayClient({ baseUrl: url, keys, encryption: { publish: memory } }).ensureEncryptionDeclared()).toBe('published')
  })
})

describe('command line: publishes the declaration the first time a key runs', () => {
  const run = async (args: string[], env: Record<string, string> = {}) => {
    const io = captureIo(dir, { env })
    const code = await runClientCommand([...args, '--relay', url, '--key', 'me.key'], io)
    return { code, out: io.out(), err: io.err() }
  }
  let me: string

  test('first command publishes and writes the marker; later commands add no request', async () => {
    const keys = generateKeyPair()
    me = keys.publicKey
    writeFileSync(join(dir, 'me.key'), encodeKeyFile(keys))
    log = []
    expect((await run(['poll'])).code).toBe(0)
    expect(profileCalls(me)).toEqual([`GET /v1/agents/${me}`, `PATCH /v1/agents/${me}`])
    expect(readFileSync(join(dir, 'me.key.declared'), 'utf8')).toBe(`${url} ${me}\n`)
    expect(await metadataOf(me)).toEqual({ encryption: { versions: [3, 2], require: false } })

    log = []
    expect((await run(['poll'])).code).toBe(0)
    expect((await run(['whoami'])).code).toBe(0)
    // whoami's own read, nothing else
    expect(profileCalls(me)).toEqual([`GET /v1/agents/${me}`])
  })

  test('profile set --encryption off sticks: no command publishes it again, even without the marker', async () => {
    expect((await run(['profile', 'set', '--encryption', 'off'])).code).toBe(0)
    expect(await metadataOf(me)).toEqual({ encryption: { versions: [], require: false } })
    rmSync(join(dir, 'me.key.declared'))
    log = []
    expect((await run(['poll'])).code).toBe(0)
    expect(profileCalls(me)).toEqual([`GET /v1/agents/${me}`])
    expect(existsSync(join(dir, 'me.key.declared'))).toBe(true)
    expect(await metadataOf(me)).toEqual({ encryption: { versions: [], require: false } })
  })

  test('profile set, agent delete and RELAY_PUBLISH_ENCRYPTION=false do not publish', async () => {
    const keys = generateKeyPair()
    writeFileSync(join(dir, 'me.key'), encodeKeyFile(keys))
    log = []
    expect((await run(['profile', 'set', '--metadata', '{"team":"ops"}'])).code).toBe(0)
    expect(await metadataOf(keys.publicKey)).toEqual({ team: 'ops' })
    expect((await run(['poll'], { RELAY_PUBLISH_ENCRYPTION: 'false' })).code).toBe(0)
    expect(await metadataOf(keys.publicKey)).toEqual({ team: 'ops' })
    expect((await run(['agent', 'delete', '--yes'])).code).toBe(0)
    expect(log.filter((l) => l.startsWith('PATCH') && l.includes(keys.publicKey))).toEqual([`PATCH /v1/agents/${keys.publicKey}`])
    expect(readFileSync(join(dir, 'me.key.declared'), 'utf8')).not.toContain(keys.publicKey)
  })
})
