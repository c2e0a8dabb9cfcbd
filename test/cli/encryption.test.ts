/**
 * End-to-end encryption through the built binary: a relay started with --require-encryption, agents
 * that declare support with `profile set --encryption`, send with encrypted attachments (0 B, 1 B and
 * 5 MiB), poll/get/thread decrypting, download --message decrypting, upload --encrypt-for, a refused
 * plaintext send made again encrypted, and no plaintext anywhere in the data directory (SQLite file,
 * WAL, blob files).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { buildBinary, startBinary, type RunningBinary } from '../support/binary.ts'
import { runCli } from '../support/cli.ts'
import { expectNoMarkerUnder } from '../support/disk.ts'
import { tempDir } from '../support/harness.ts'

const MARKER = 'PLAINTEXT-MARKER-7f3a'
let dir: string
let relay: RunningBinary
let peer: string
const as = (key: string) => (args: string[]) => runCli([...args, '--relay', relay.url, '--key', key], { cwd: dir })
let me: ReturnType<typeof as>
let them: ReturnType<typeof as>

function markerFile(size: number): Uint8Array {
  const out = new Uint8Array(size)
  for (let i = 0; i < size; i++) out[i] = MARKER.charCodeAt(i % MARKER.length)
  return out
}

beforeAll(async () => {
  await buildBinary()
  dir = tempDir('relay-cli-e2e-')
  relay = await startBinary({ cwd: dir, dataDir: join(dir, 'data'), args: ['--require-encryption'] })
  await runCli(['keygen', '--out', 'me.key'], { cwd: dir })
  peer = (await runCli(['keygen', '--out', 'peer.key'], { cwd: dir })).stdout.trim()
  me = as('me.key')
  them = as('peer.key')
}, 120_000)
afterAll(async () => {
  relay?.proc.kill('SIGTERM')
  await relay?.proc.exited
  rmSync(dir, { recursive: true, force: true })
})

describe('relay CLI, end to end encrypted', () => {
  test('declare, send with attachments, receive decrypted, download decrypted; nothing readable stored', async () => {
    const declared = await them(['profile', 'set', '--encryption', 'accept', '--json'])
    expect(declared.code).toBe(0)
    expect(JSON.parse(declared.stdout).metadata.encryption).toEqual({ versions: [3, 2], require: false })

    const sizes = { 'zero.bin': 0, 'one.bin': 1, 'big.bin': 5 * 1024 * 1024 }
    for (const [name, size] of Object.entries(sizes)) writeFileSync(join(dir, name), markerFile(size))
    const sent = await me(['send', '--to', peer, '--text', `${MARKER} body`, '--thread', 'enc-thread', ...Object.keys(sizes).flatMap((f) => ['--attach', f])])
    expect(sent.stderr).toBe('')
    expect(sent.code).toBe(0)
    expect(sent.stdout).toContain('encryption   end to end, v3')

    const polled = await them(['poll', '--json'])
    const [msg] = JSON.parse(polled.stdout).messages
    expect(msg.body).toEqual({ text: `${MARKER} body` })
    expect(msg.encryption).toMatchObject({ version: 3, sender_verified: true })
    expect(msg.attachments.map((a: { encrypted: boolean; filename?: string }) => [a.encrypted, a.filename])).toEqual([[true, undefined], [true, undefined], [true, undefined]])

    const shown = await them(['get', msg.message_id])
    expect(shown.stdout).toContain('encryption    encrypted (v3), decrypted, sender verified')
    expect(shown.stdout).toContain(`${MARKER} body`)
    const thread = await them(['thread', 'enc-thread'])
    expect(thread.stdout).toContain(`🔒 {"text":"${MARKER} body"}`)

    for (const [i, [name, size]] of Object.entries(sizes).entries()) {
      const out = `got-${name}`
      const d = await them(['download', msg.attachments[i].blob_id, '--message', msg.message_id, '-o', out])
      expect(d.stderr).toBe('')
      expect(d.code).toBe(0)
      expect(d.stdout).toContain('decrypted     yes')
      expect(readFileSync(join(dir, out)).length).toBe(size)
      expect(readFileSync(join(dir, out)).equals(readFileSync(join(dir, name)))).toBe(true)
    }

    expectNoMarkerUnder(join(dir, 'data'), MARKER)
  }, 120_000)

  test('the relay refuses plaintext (--plain) with encryption_required; upload --encrypt-for and --blob ID:DEK_ENC:DEK_CT', async () => {
    const refused = await me(['send', '--to', peer, '--text', 'x', '--plain'])
    expect(refused.code).not.toBe(0)
    expect(refused.stderr).toContain('encryption_required')

    writeFileSync(join(dir, 'alone.bin'), markerFile(70_000))
    const up = await me(['upload', 'alone.bin', '--encrypt-for', peer])
    expect(up.code).toBe(0)
    const ref = up.stdout.match(/send with\s+--blob (\S+)/)![1]!
    const sent = await me(['send', '--to', peer, '--blob', ref, '--json'])
    expect(sent.code).toBe(0)
    const id = JSON.parse(sent.stdout).message_id
    const blobId = ref.split(':')[0]!
    const d = await them(['download', blobId, '--message', id, '-o', 'alone.out'])
    expect(d.code).toBe(0)
    expect(readFileSync(join(dir, 'alone.out')).equals(readFileSync(join(dir, 'alone.bin')))).toBe(true)
    expectNoMarkerUnder(join(dir, 'data'), MARKER)
  }, 60_000)

  test('to an agent that declares nothing, the relay refuses the plaintext send and the CLI sends it again encrypted (v2), files included', async () => {
    // quiet never publishes a declaration: the sender has nothing to go on but the refusal
    const quiet = (await runCli(['keygen', '--out', 'quiet.key'], { cwd: dir })).stdout.trim()
    const asQuiet = (args: string[]) => runCli([...args, '--relay', relay.url, '--key', 'quiet.key'], { cwd: dir, env: { RELAY_PUBLISH_ENCRYPTION: 'false' } })
    expect((await asQuiet(['whoami'])).code).toBe(0)
    writeFileSync(join(dir, 'quiet.bin'), markerFile(3000))
    const sent = await me(['send', '--to', quiet, '--text', `${MARKER} retried`, '--attach', 'quiet.bin'])
    expect(sent.stderr).toBe('')
    expect(sent.code).toBe(0)
    expect(sent.stdout).toContain('encryption   end to end, v2')
    // --body, which goes byte for byte when plaintext, is sealed the second time
    const raw = await me(['send', '--to', quiet, '--body', `{"text": "${MARKER} raw"}`, '--json'])
    expect(raw.code).toBe(0)

    const polled = JSON.parse((await asQuiet(['poll', '--json'])).stdout).messages
    expect(polled.map((m: { body: unknown; encryption: unknown }) => [m.body, m.encryption])).toEqual([
      [{ text: `${MARKER} retried` }, { version: 2, sender_verified: true }],
      [{ text: `${MARKER} raw` }, { version: 2, sender_verified: true }],
    ])
    const [att] = polled[0].attachments
    expect(att.encrypted).toBe(true)
    expect(att.filename).toBeUndefined()
    const d = await asQuiet(['download', att.blob_id, '--message', polled[0].message_id, '-o', 'quiet.out'])
    expect(d.code).toBe(0)
    expect(readFileSync(join(dir, 'quiet.out')).equals(readFileSync(join(dir, 'quiet.bin')))).toBe(true)
  }, 60_000)
})
