/**
 * `relay send --encrypt` to an agent that declares nothing, through the built binary: the rule of
 * docs/protocol.md §14.6 — plaintext unless asked, and when asked v2 (what MRP agents read) — for the
 * body (text and --body) and every --attach file, sent without its name; the recipient decrypts all of
 * it, and the data directory holds no plaintext.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { buildBinary, startBinary, type RunningBinary } from '../support/binary.ts'
import { runCli } from '../support/cli.ts'
import { expectNoMarkerUnder } from '../support/disk.ts'
import { tempDir } from '../support/harness.ts'

const MARKER = 'OPT-IN-MARKER-c41e'
/** The recipient never publishes a declaration; the sender's own does not matter here. */
const QUIET = { RELAY_PUBLISH_ENCRYPTION: 'false' }
let dir: string
let relay: RunningBinary
let peer: string
const as = (key: string) => (args: string[]) => runCli([...args, '--relay', relay.url, '--key', key], { cwd: dir, env: QUIET })
let me: ReturnType<typeof as>
let them: ReturnType<typeof as>

beforeAll(async () => {
  await buildBinary()
  dir = tempDir('relay-cli-optin-')
  relay = await startBinary({ cwd: dir, dataDir: join(dir, 'data') })
  await runCli(['keygen', '--out', 'me.key'], { cwd: dir })
  peer = (await runCli(['keygen', '--out', 'peer.key'], { cwd: dir })).stdout.trim()
  me = as('me.key')
  them = as('peer.key')
  expect((await them(['whoami'])).code).toBe(0)
}, 120_000)
afterAll(async () => {
  relay?.proc.kill('SIGTERM')
  await relay?.proc.exited
  rmSync(dir, { recursive: true, force: true })
})

describe('relay send to an agent that declares nothing', () => {
  test('without --encrypt: plaintext, the file with its name', async () => {
    writeFileSync(join(dir, 'open.txt'), 'an open file\n')
    const sent = await me(['send', '--to', peer, '--text', 'in the clear', '--attach', 'open.txt'])
    expect(sent.code).toBe(0)
    expect(sent.stdout).toMatch(/^encryption +none \(the recipient declares none; --encrypt to encrypt\)$/m)
    const [m] = JSON.parse((await them(['poll', '--json'])).stdout).messages
    expect(m.content_type).toBe('application/json')
    expect(m.encryption).toBeUndefined()
    expect(m.attachments[0]).toMatchObject({ filename: 'open.txt', encrypted: false })
  })

  test('--encrypt: v2 for the body and every file, files without names; the recipient decrypts them', async () => {
    const secretName = `${MARKER}.bin`
    writeFileSync(join(dir, secretName), Buffer.alloc(150_000, `${MARKER} file `))
    const sent = await me(['send', '--to', peer, '--text', `${MARKER} body`, '--attach', secretName, '--encrypt', '--json'])
    expect([sent.code, sent.stderr]).toEqual([0, ''])
    const raw = await me(['send', '--to', peer, '--body', `{"note": "${MARKER} raw"}`, '--encrypt'])
    expect(raw.code).toBe(0)
    expect(raw.stdout).toMatch(/^encryption +end to end, v2$/m)

    const [m, r] = JSON.parse((await them(['poll', '--json'])).stdout).messages
    expect(m).toMatchObject({ message_id: JSON.parse(sent.stdout).message_id, body: { text: `${MARKER} body` }, encryption: { version: 2, sender_verified: true } })
    expect(r).toMatchObject({ body: { note: `${MARKER} raw` }, encryption: { version: 2, sender_verified: true } })
    const [att] = m.attachments
    expect(att).toMatchObject({ encrypted: true, content_type: 'application/octet-stream' })
    expect(att.filename).toBeUndefined()
    const d = await them(['download', att.blob_id, '--message', m.message_id, '-o', 'got.bin'])
    expect([d.code, d.stderr]).toEqual([0, ''])
    expect(readFileSync(join(dir, 'got.bin')).equals(readFileSync(join(dir, secretName)))).toBe(true)

    // the marker is in the body, the file and the file's name: none of it reached the relay's disk
    expectNoMarkerUnder(join(dir, 'data'), MARKER)
  }, 60_000)
})
