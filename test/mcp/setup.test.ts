/**
 * What the model gets up front: a readable error when the bridge cannot start (not a closed
 * connection), the relay's own rules in the tool schemas, and relay_whoami's facts about the inbox,
 * the files it may touch and encryption.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { chmodSync, mkdirSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { RelayClient } from '../../src/client/index.ts'
import { startBinary, tempDataDir, type RunningRelay } from '../e2e/binary.ts'
import { tempDir } from '../support/harness.ts'
import { call, newAgent, ok, stdioBridge, textOf, untilPending, type Agent } from './helpers.ts'

let relay: RunningRelay
let dir: string
let alice: Agent

beforeAll(async () => {
  relay = await startBinary(tempDataDir())
  dir = tempDir('relay-mcp-setup-')
  alice = newAgent(dir, 'alice')
}, 120_000)
afterAll(async () => {
  await relay?.stop()
  rmSync(dir, { recursive: true, force: true })
})

test('a missing key file: the host connects and is told what is wrong and how to fix it', async () => {
  const missing = { keys: alice.keys, keyFile: join(dir, 'nowhere', 'agent.key') }
  const b = await stdioBridge({ relayUrl: relay.url, agent: missing, cwd: dir })
  try {
    expect(b.client.getInstructions()).toContain(`no key file at ${missing.keyFile}`)
    const r = await call(b, 'relay_whoami')
    expect(r.isError).toBe(true)
    expect(textOf(r)).toContain('relay keygen')
  } finally {
    await b.close()
  }
})

test('a key file that is not a key, or cannot be read: the host is told which and why', async () => {
  const garbled = join(dir, 'garbled.key')
  writeFileSync(garbled, 'not a key at all\n', { mode: 0o600 })
  const unreadable = join(dir, 'a-directory.key')
  mkdirSync(unreadable)
  for (const [keyFile, words] of [
    [garbled, `key file ${garbled}:`],
    [unreadable, `cannot read key file ${unreadable}`],
  ]) {
    const b = await stdioBridge({ relayUrl: relay.url, agent: { keys: alice.keys, keyFile }, cwd: dir })
    try {
      expect(b.client.getInstructions()).toContain(words)
      const r = await call(b, 'relay_whoami')
      expect(r.isError).toBe(true)
      expect(textOf(r)).toContain(words)
      expect(textOf(r)).toContain('Tell the user')
    } finally {
      await b.close()
    }
  }
})

test('without --files: the private default directory is made 0700 under XDG_DATA_HOME; one open to others is told to the host', async () => {
  const xdg = join(dir, 'xdg-default')
  const b = await stdioBridge({ relayUrl: relay.url, agent: alice, cwd: dir, defaultFiles: true, env: { XDG_DATA_HOME: xdg } })
  const home = join(xdg, 'agent-relay', 'mcp-files')
  try {
    const me = await ok(b, 'relay_whoami')
    expect(me.files).toEqual({ directories: [home], download_dir: home, overwrite_allowed: false })
    expect(statSync(home).mode & 0o777).toBe(0o700)
  } finally {
    await b.close()
  }
  chmodSync(home, 0o755)
  const refused = await stdioBridge({ relayUrl: relay.url, agent: alice, cwd: dir, defaultFiles: true, env: { XDG_DATA_HOME: xdg } })
  try {
    const r = await call(refused, 'relay_whoami')
    expect(r.isError).toBe(true)
    expect(textOf(r)).toContain(`${home} is open to other users`)
  } finally {
    await refused.close()
  }
})

test('tool schemas carry the relay rules, so a bad call fails before the relay is asked', async () => {
  const b = await stdioBridge({ relayUrl: relay.url, agent: alice, cwd: dir })
  try {
    const { tools } = await b.client.listTools()
    const discover = tools.find((t) => t.name === 'relay_discover')!
    expect(JSON.stringify(discover.inputSchema)).toContain('^[A-Za-z0-9_:.-]+$')
    const profile = tools.find((t) => t.name === 'relay_update_profile')!
    expect(JSON.stringify(profile.inputSchema)).toContain('"maxLength":64')
    const send = tools.find((t) => t.name === 'relay_send')!
    expect(JSON.stringify(send.inputSchema)).toContain('dek_enc')
    const bad = await call(b, 'relay_update_profile', { capabilities: [{ name: 'x', tags: ['no spaces allowed'] }] })
    expect(bad.isError).toBe(true)
    expect(textOf(bad)).toContain('tags')

    // whoami: inbox facts, the file directories, encryption
    const bob = newAgent(dir, 'bob')
    const sender = new RelayClient({ baseUrl: relay.url, keys: bob.keys })
    await sender.send({ recipient_key: alice.keys.publicKey, body: { text: 'one' } })
    await untilPending(b, 1)
    const me = await ok(b, 'relay_whoami')
    expect(me.inbox).toMatchObject({ pending_count: 1, senders: 1 })
    expect(me.inbox.rule).toContain('relay_ack')
    expect(me.files).toEqual({ directories: [dir], download_dir: dir, overwrite_allowed: false })
    expect(me.encryption).toMatchObject({ end_to_end: true, declared: true })
  } finally {
    await b.close()
  }
})
