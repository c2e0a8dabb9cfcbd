/**
 * A bridge whose relay is down: calls fail with a message naming the URL (never a stack trace), the
 * inbox explains that it waits for the socket rather than polling, and once the relay is up the
 * messages that waited there arrive.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { RelayClient } from '../../src/client/index.ts'
import { buildBinary, freePort, startBinary, type RunningBinary } from '../support/binary.ts'
import { tempDir } from '../support/harness.ts'
import { call, newAgent, ok, stdioBridge, textOf, type Agent, type Bridge } from './helpers.ts'

let dir: string
let port: number
let url: string
let bob: Agent
let b: Bridge
let relay: RunningBinary | undefined

beforeAll(async () => {
  await buildBinary()
  dir = tempDir('relay-mcp-offline-')
  port = await freePort()
  url = `http://127.0.0.1:${port}`
  bob = newAgent(dir, 'bob')
  b = await stdioBridge({ relayUrl: url, agent: bob, cwd: dir })
}, 120_000)

afterAll(async () => {
  await b?.close()
  relay?.proc.kill('SIGTERM')
  await relay?.proc.exited
  rmSync(dir, { recursive: true, force: true })
})

describe('relay down', () => {
  test('a call fails with isError naming the relay URL', async () => {
    const r = await call(b, 'relay_whoami')
    expect(r.isError).toBe(true)
    expect(textOf(r)).toStartWith(`cannot reach the relay at ${url} (`)
    expect(textOf(r)).not.toContain('    at ')
  })

  test('the inbox answers, empty, and says it waits for the socket instead of polling', async () => {
    const inbox = await ok(b, 'relay_inbox')
    expect(inbox.messages).toEqual([])
    expect(inbox.connection.state).not.toBe('connected')
    expect(inbox.connection.websocket_url).toBe(`ws://127.0.0.1:${port}/v1/ws`)
    expect(inbox.connection.note).toContain('not lost')
    expect(inbox.connection.note).toContain('does not poll')
    expect(b.stderr()).toContain(`cannot connect to ws://127.0.0.1:${port}/v1/ws`)
  })

  test('once the relay is up, messages that waited there arrive', async () => {
    const data = join(dir, 'data')
    mkdirSync(data)
    relay = await startBinary({ cwd: dir, dataDir: data, port })
    const alice = newAgent(dir, 'alice')
    const sent = await new RelayClient({ baseUrl: url, keys: alice.keys }).send({ recipient_key: bob.keys.publicKey, body: { text: 'stored while you were away' } })
    const got = await ok(b, 'relay_wait', { timeout_s: 60 })
    expect(got.message?.message_id).toBe(sent.message_id)
    expect(got.connection.state).toBe('connected')
    expect((await ok(b, 'relay_whoami')).public_key).toBe(bob.keys.publicKey)
  }, 90_000)
})
