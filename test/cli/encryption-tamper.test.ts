/**
 * Tampering, through the built binary: a changed byte in the stored ciphertext of a message (`ct` in
 * the SQLite row) or in the stored blob file gives a clear decryption error on standard error, a
 * non-zero exit code, and nothing decrypted wrongly — no body printed, no output file left behind.
 */
import { Database } from 'bun:sqlite'
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { bindEncryption } from '../../src/crypto/index.ts'
import { nativePrimitives } from '../../src/crypto/native.ts'
import { decodeBase64Url, encodeBase64Url } from '../../src/lib/base64url.ts'
import { buildBinary, startBinary, type RunningBinary } from '../support/binary.ts'
import { runCli } from '../support/cli.ts'
import { blobFileOf } from '../support/disk.ts'
import { tempDir } from '../support/harness.ts'

const MARKER = 'TAMPER-MARKER-51c2'
let dir: string
let relay: RunningBinary
let peer: string
const as = (key: string) => (args: string[]) => runCli([...args, '--relay', relay.url, '--key', key], { cwd: dir })
let me: ReturnType<typeof as>
let them: ReturnType<typeof as>

/** Sends an encrypted message with one 200 KB attachment; returns the message as the recipient reads it. */
async function sendOne(tag: string) {
  writeFileSync(join(dir, `${tag}.bin`), Buffer.alloc(200_000, `${MARKER} ${tag} `))
  const sent = await me(['send', '--to', peer, '--text', `${MARKER} ${tag}`, '--attach', `${tag}.bin`, '--json'])
  expect(sent.code).toBe(0)
  const got = await them(['get', JSON.parse(sent.stdout).message_id, '--json'])
  expect(got.code).toBe(0)
  return JSON.parse(got.stdout) as { message_id: string; attachments: { blob_id: string; size: number; hash: string }[] }
}

function flipByte(bytes: Uint8Array, at: number): void {
  bytes[at] = bytes[at]! ^ 0x01
}

beforeAll(async () => {
  await buildBinary()
  dir = tempDir('relay-cli-tamper-')
  relay = await startBinary({ cwd: dir, dataDir: join(dir, 'data') })
  await runCli(['keygen', '--out', 'me.key'], { cwd: dir })
  peer = (await runCli(['keygen', '--out', 'peer.key'], { cwd: dir })).stdout.trim()
  me = as('me.key')
  them = as('peer.key')
  expect((await them(['profile', 'set', '--encryption', 'accept'])).code).toBe(0)
}, 120_000)
afterAll(async () => {
  relay?.proc.kill('SIGTERM')
  await relay?.proc.exited
  rmSync(dir, { recursive: true, force: true })
})

describe('tampered ciphertext, through the CLI', () => {
  test('a byte of ct changed in the database: get names the reason, prints no body, exits 1', async () => {
    const sent = await sendOne('ct')
    const untouched = await them(['get', sent.message_id])
    expect(untouched.code).toBe(0)
    expect(untouched.stdout).toContain(`${MARKER} ct`)

    const db = new Database(join(dir, 'data', 'relay.db'))
    db.run('PRAGMA busy_timeout = 5000')
    const row = db.query('SELECT body FROM messages WHERE message_id = ?').get(sent.message_id) as { body: string }
    const body = JSON.parse(row.body) as { ct: string }
    const ct = decodeBase64Url(body.ct)!
    flipByte(ct, Math.floor(ct.length / 2))
    db.run('UPDATE messages SET body = ? WHERE message_id = ?', [JSON.stringify({ ...body, ct: encodeBase64Url(ct) }), sent.message_id])
    db.close()

    for (const args of [['get', sent.message_id], ['get', sent.message_id, '--json']]) {
      const r = await them(args)
      expect(r.code).toBe(1)
      expect(r.stderr).toMatch(new RegExp(`^relay: error: message ${sent.message_id} was not decrypted: \\S+ — .+\\n$`))
      expect(r.stdout).not.toContain(MARKER)
      if (args.includes('--json')) expect(JSON.parse(r.stdout).encryption.error.reason).toEqual(expect.any(String))
      else {
        expect(r.stdout).toContain('NOT decrypted')
        // the envelope is shown, the encrypted body is not dumped as if it were the message
        expect(r.stdout).not.toContain(body.ct.slice(0, 20))
      }
    }
    // a list keeps going: poll marks it and exits 0
    const polled = await them(['poll'])
    expect(polled.code).toBe(0)
  }, 60_000)

  test('a byte of the stored blob changed: download --message fails with the reason and keeps no file', async () => {
    const sent = await sendOne('blob')
    const blobFile = blobFileOf(join(dir, 'data'), sent.attachments[0]!.hash)
    const good = await them(['download', sent.attachments[0]!.blob_id, '--message', sent.message_id, '-o', 'good.out'])
    expect(good.code).toBe(0)
    expect(readFileSync(join(dir, 'good.out')).equals(readFileSync(join(dir, 'blob.bin')))).toBe(true)

    const bytes = readFileSync(blobFile)
    flipByte(bytes, bytes.length - 100)
    writeFileSync(blobFile, bytes)
    const before = readdirSync(dir)
    const r = await them(['download', sent.attachments[0]!.blob_id, '--message', sent.message_id, '-o', 'bad.out'])
    expect(r.code).toBe(1)
    expect(r.stderr).toMatch(/^relay: error: .*(decrypt|authentic|tamper|corrupt)/i)
    expect(r.stdout).toBe('')
    expect(existsSync(join(dir, 'bad.out'))).toBe(false)
    expect(readdirSync(dir)).toEqual(before)
    // to standard output: the same error and exit code (what was already written is the caller's to drop)
    const piped = await them(['download', sent.attachments[0]!.blob_id, '--message', sent.message_id, '-o', '-'])
    expect(piped.code).toBe(1)
    expect(piped.stderr).toMatch(/^relay: error: /)
  }, 60_000)

  test("the operator swaps an attachment's wrapped key (its own, Base mode) and the blob: download --message refuses it", async () => {
    const sent = await sendOne('forge')
    const blobFile = blobFileOf(join(dir, 'data'), sent.attachments[0]!.hash)
    const e2e = bindEncryption(nativePrimitives)
    const dek = e2e.newDek()
    const wrapped = e2e.wrapDek({ version: 3, dek, sender: generateKeyPair(), recipientKey: peer })
    writeFileSync(blobFile, await e2e.encryptBlob(dek, Buffer.alloc(200_000, 'FORGED ')))
    const db = new Database(join(dir, 'data', 'relay.db'))
    db.run('PRAGMA busy_timeout = 5000')
    const row = db.query('SELECT attachments FROM messages WHERE message_id = ?').get(sent.message_id) as { attachments: string }
    const attachments = JSON.parse(row.attachments) as Record<string, unknown>[]
    db.run('UPDATE messages SET attachments = ? WHERE message_id = ?', [JSON.stringify([{ ...attachments[0], ...wrapped }]), sent.message_id])
    db.close()
    const before = readdirSync(dir)
    for (const out of ['forged.out', '-']) {
      const r = await them(['download', sent.attachments[0]!.blob_id, '--message', sent.message_id, '-o', out])
      expect(r.code).toBe(1)
      expect(r.stderr).toMatch(/^relay: error: decryption failed \(unauthenticated\): /)
      expect(r.stdout).not.toContain('FORGED')
    }
    expect(readdirSync(dir)).toEqual(before)
  }, 60_000)
})
