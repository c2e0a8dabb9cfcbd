/**
 * `relay listen` (encrypted messages decrypted and marked, one that does not open included) and `relay
 * webhook set|get|delete` through the built binary, against a live relay.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { spawn } from 'bun'
import { rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { encodeKeyFile, generateKeyPair } from '../../src/auth/sign.ts'
import { FakeClock } from '../../src/lib/clock.ts'
import { BINARY, buildBinary } from '../support/binary.ts'
import { runCli } from '../support/cli.ts'
import { startTestRelay, tempDir, type TestRelay } from '../support/harness.ts'
import { until } from '../support/ws.ts'

const keys = generateKeyPair()
let dir: string
let t: TestRelay
let url: string
beforeAll(async () => {
  await buildBinary()
  dir = tempDir('relay-cli-rt-')
  writeFileSync(join(dir, 'relay.key'), encodeKeyFile(keys), { mode: 0o600 })
  // the binary signs with the wall clock: start the fake clock there
  t = await startTestRelay({ host: '127.0.0.1', rateLimits: { sendPerMin: 0, pollPerMin: 0 } }, { clock: new FakeClock(Date.now()) })
  url = (await t.relay.start()).url
})
afterAll(async () => {
  await t.close()
  rmSync(dir, { recursive: true, force: true })
})

const env = () => ({ RELAY_URL: url })
const cli = (...args: string[]) => runCli(args, { cwd: dir, env: env() })

function startListen(...args: string[]) {
  const proc = spawn([BINARY, 'listen', ...args], { cwd: dir, env: { PATH: process.env.PATH ?? '', ...env() }, stdout: 'pipe', stderr: 'pipe' })
  let stdout = ''
  const read = (async () => {
    for await (const chunk of proc.stdout) stdout += new TextDecoder().decode(chunk)
  })()
  const out = Promise.all([proc.exited, read.then(() => stdout), new Response(proc.stderr).text()])
  return { proc, out, stdout: () => stdout }
}

const hub = () => t.relay.features.realtime.hub

describe('relay listen', () => {
  test('prints waiting and new messages as JSON lines, acks them, stops after --count', async () => {
    const alice = t.client()
    const first = await alice.send({ recipient_key: keys.publicKey, body: { n: 1 } })
    t.clock.advance(1)
    const { out } = startListen('--count', '2')
    await until(() => hub().connectionsOf(keys.publicKey).length === 1, 10_000, 'the listener to connect')
    const second = await alice.send({ recipient_key: keys.publicKey, body: { n: 2 } })
    const [code, stdout, stderr] = await out
    expect([code, stderr]).toEqual([0, `listening as ${keys.publicKey} on ${url}\n`])
    const lines = stdout.trim().split('\n').map((l) => JSON.parse(l))
    expect(lines.map((m) => [m.message_id, m.body])).toEqual([
      [first.message_id, { n: 1 }],
      [second.message_id, { n: 2 }],
    ])
    await until(() => hub().connectionsOf(keys.publicKey).length === 0, 5000, 'the listener to close')
    for (const m of [first, second]) expect((await alice.messageStatus(m.message_id)).status).toBe('delivered')
  })

  test('--no-ack leaves the message sent; Ctrl-C (SIGINT) stops it cleanly', async () => {
    const alice = t.client()
    const sent = await alice.send({ recipient_key: keys.publicKey, body: 'keep me' })
    const listener = startListen('--no-ack')
    const { proc, out } = listener
    await until(() => listener.stdout().includes(sent.message_id), 10_000, 'the message to be printed')
    proc.kill('SIGINT')
    const [code, stdout] = await out
    expect(code).toBe(0)
    expect(JSON.parse(stdout.trim()).message_id).toBe(sent.message_id)
    expect((await alice.messageStatus(sent.message_id)).status).toBe('sent')
    // acked by a later listener
    const again = startListen('--count', '1')
    expect(JSON.parse((await again.out)[1].trim()).message_id).toBe(sent.message_id)
    expect((await alice.messageStatus(sent.message_id)).status).toBe('delivered')
  })

  test('decrypts encrypted messages and marks them; one that does not open is printed with the reason and the listener goes on', async () => {
    const alice = t.client()
    const sealedV3 = await alice.send({ recipient_key: keys.publicKey, body: { secret: 'v3 body' }, thread_id: 'enc-listen', encrypt: 3 })
    t.clock.advance(1)
    // sealed for another key, addressed to this one: it cannot open here
    const elsewhere = alice.encryption.api.sealMessage({ version: 3, sender: alice.transport.keys, recipientKey: generateKeyPair().publicKey, body: { secret: 'not for you' } })
    const broken = await alice.send({ recipient_key: keys.publicKey, ...elsewhere })
    t.clock.advance(1)
    const { out } = startListen('--count', '3')
    await until(() => hub().connectionsOf(keys.publicKey).length === 1, 10_000, 'the listener to connect')
    const sealedV2 = await alice.send({ recipient_key: keys.publicKey, body: 'v2 after the broken one', encrypt: 2 })
    const [code, stdout, stderr] = await out
    expect([code, stderr]).toEqual([0, `listening as ${keys.publicKey} on ${url}\n`])
    const [first, second, third] = stdout.trim().split('\n').map((l) => JSON.parse(l))
    expect(first).toMatchObject({ message_id: sealedV3.message_id, body: { secret: 'v3 body' }, content_type: 'application/json', encryption: { version: 3, sender_verified: true } })
    expect(second).toMatchObject({ message_id: broken.message_id, content_type: 'application/x-m2m-encrypted', encryption: { version: 3, sender_verified: false, error: { reason: 'authentication_failed' } } })
    expect(JSON.stringify(second)).not.toContain('not for you')
    expect(third).toMatchObject({ message_id: sealedV2.message_id, body: 'v2 after the broken one', encryption: { version: 2, sender_verified: true } })
    for (const m of [sealedV3, broken, sealedV2]) expect((await alice.messageStatus(m.message_id)).status).toBe('delivered')
  })

  test('usage errors', async () => {
    const r = await cli('listen', '--count', '0')
    expect(r.code).toBe(2)
    expect(r.stderr).toContain('--count must be a positive integer')
  })
})

describe('relay webhook', () => {
  test('set with a secret, get, delete; errors show the code', async () => {
    const secret = randomBytes(32).toString('base64url')
    const set = await cli('webhook', 'set', '--url', 'https://agent.example/hook', '--secret', secret)
    expect(set.code).toBe(0)
    expect(set.stdout).toMatch(/^url\s+https:\/\/agent\.example\/hook\nenabled\s+true\nconsecutive failures\s+0\ncreated\s+\S+\nupdated\s+\S+\n$/)
    expect(set.stdout + set.stderr).not.toContain(secret)
    const got = JSON.parse((await cli('webhook', 'get', '--json')).stdout)
    expect(got).toMatchObject({ url: 'https://agent.example/hook', enabled: true, consecutive_failures: 0 })
    expect((await cli('webhook', 'delete')).stdout).toBe('deleted\n')
    const missing = await cli('webhook', 'get')
    expect(missing.code).toBe(1)
    expect(missing.stderr).toMatch(/^relay: error: .* \(code not_found, request req_[0-9a-f]+\)\n$/)
    const bad = await cli('webhook', 'set', '--url', 'https://agent.example/hook', '--secret', 'short')
    expect(bad.code).toBe(1)
    expect(bad.stderr).toContain('code bad_request')
    expect(bad.stderr).toContain('secret')
  })

  test('set without --secret generates one, prints it once and registers it; --secret @- reads it from standard input', async () => {
    const r = await cli('webhook', 'set', '--url', 'https://agent.example/in', '--json')
    expect(r.code).toBe(0)
    const out = JSON.parse(r.stdout)
    expect(out.secret).toMatch(/^[A-Za-z0-9_-]{43}$/)
    const [stored] = await t.sql<{ secret: string }>('SELECT secret FROM webhooks WHERE public_key = ?', [keys.publicKey])
    expect(stored?.secret).toBe(out.secret)
    const text = await cli('webhook', 'set', '--url', 'https://agent.example/in')
    expect(text.stdout).toMatch(/\nsecret\s+[A-Za-z0-9_-]{43}\n$/)
    expect(text.stderr).toContain('never shows it again')
    const fromStdin = await runCli(['webhook', 'set', '--url', 'https://agent.example/in', '--secret', '@-'], { cwd: dir, env: env(), stdin: randomBytes(32).toString('base64url') + '\n' })
    expect(fromStdin.code).toBe(0)
    await cli('webhook', 'delete')
  })

  test('usage: --url is required', async () => {
    const r = await cli('webhook', 'set')
    expect(r.code).toBe(2)
    expect(r.stderr).toContain('--url is required')
  })
})
