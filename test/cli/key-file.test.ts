/**
 * `--key FILE` reads the key files MRP tools write: relay keygen's JSON, the raw 32-byte seed (mrp-sdk's
 * Keypair.save), the 64-byte seed + public key, and the seed in hex or base64/base64url. Anything else
 * is an error naming the formats; a key file others can read gets a warning.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { chmodSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { decodeBase64Url } from '../../src/lib/base64url.ts'
import { FakeClock } from '../../src/lib/clock.ts'
import { encodeKeyFile, generateKeyPair } from '../../src/auth/sign.ts'
import { readKeyFile, runClientCommand } from '../../src/cli/client-cli.ts'
import { startTestRelay, tempDir, type TestRelay } from '../support/harness.ts'
import { captureIo } from '../support/cli.ts'

const dir = tempDir('relay-keyfile-')
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const keys = generateKeyPair()
const seed = Buffer.from(keys.seed)
const publicBytes = Buffer.from(decodeBase64Url(keys.publicKey)!)

function file(name: string, content: string | Uint8Array, mode = 0o600): string {
  const path = join(dir, name)
  writeFileSync(path, content)
  chmodSync(path, mode)
  return path
}

describe('formats', () => {
  const cases: [string, string | Uint8Array][] = [
    ['relay keygen JSON', encodeKeyFile(keys)],
    ['raw 32-byte seed (mrp-sdk Keypair.save)', seed],
    ['64 bytes: seed + public key', Buffer.concat([seed, publicBytes])],
    ['hex seed', seed.toString('hex')],
    ['hex seed with a newline, upper case', seed.toString('hex').toUpperCase() + '\n'],
    ['hex seed + public key', Buffer.concat([seed, publicBytes]).toString('hex')],
    ['base64 seed (padded)', seed.toString('base64')],
    ['base64 seed (unpadded)', seed.toString('base64').replace(/=+$/, '') + '\n'],
    ['base64url seed', seed.toString('base64url')],
  ]
  for (const [name, content] of cases) {
    test(name, () => {
      const warnings: string[] = []
      const got = readKeyFile(file(name.replace(/\W+/g, '-') + '.key', content), (l) => warnings.push(l))
      expect(got.publicKey).toBe(keys.publicKey)
      expect(warnings).toEqual([])
    })
  }
  test('anything else is an error naming the formats', () => {
    for (const [name, content] of [
      ['short', Buffer.alloc(31, 1)],
      ['text', 'hello world'],
      ['hex-31', Buffer.alloc(31, 7).toString('hex')],
      ['mismatched-64', Buffer.concat([seed, Buffer.alloc(32, 9)])],
    ] as const) {
      const path = file(`bad-${name}.key`, content)
      expect(() => readKeyFile(path, () => {})).toThrow(`key file ${path}:`)
    }
    const path = file('bad-text.key', 'hello world')
    expect(() => readKeyFile(path, () => {})).toThrow(/raw 32-byte Ed25519 seed.*64 hex characters.*base64/)
  })
})

describe('permissions', () => {
  test('a key file others can read gets a warning that says how to fix it; 0600 and 0400 none', () => {
    for (const mode of [0o644, 0o640, 0o604]) {
      const warnings: string[] = []
      const path = file(`open-${mode.toString(8)}.key`, seed, mode)
      expect(readKeyFile(path, (l) => warnings.push(l)).publicKey).toBe(keys.publicKey)
      expect(warnings.join('')).toContain(`chmod 600 ${path}`)
      expect(warnings.join('')).toContain(`mode 0${mode.toString(8)}`)
    }
    for (const mode of [0o600, 0o400]) {
      const warnings: string[] = []
      readKeyFile(file(`closed-${mode.toString(8)}.key`, seed, mode), (l) => warnings.push(l))
      expect(warnings).toEqual([])
    }
  })
})

describe('--key with an MRP seed file on a command', () => {
  let t: TestRelay
  let url: string
  beforeAll(async () => {
    // the command signs with the wall clock
    t = await startTestRelay({}, { clock: new FakeClock(Date.now()) })
    url = (await t.relay.start()).url
  })
  afterAll(() => t.close())
  test('a send signed with the raw seed arrives from that key; the open file is warned about', async () => {
    const recipient = generateKeyPair()
    file('mrp.key', seed, 0o644)
    const io = captureIo(dir)
    const code = await runClientCommand(['send', '--to', recipient.publicKey, '--text', 'hi', '--relay', url, '--key', 'mrp.key'], io)
    expect([code, io.err()]).toEqual([0, expect.stringContaining('can be read by others')])
    const page = await t.client(recipient).poll()
    expect(page.messages.map((m) => m.sender_key)).toEqual([keys.publicKey])
    const bad = captureIo(dir)
    file('junk.key', 'not a key', 0o600)
    expect(await runClientCommand(['send', '--to', recipient.publicKey, '--text', 'hi', '--relay', url, '--key', 'junk.key'], bad)).toBe(1)
    expect(bad.err()).toContain('a key file holds one of: relay keygen JSON')
  })
})
