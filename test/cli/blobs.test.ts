/**
 * upload, download (with their progress bars, encrypted or not), send (with --attach) and poll through the
 * built binary, against a running binary relay.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { spawn } from 'bun'
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { runClientCommand } from '../../src/cli/client-cli.ts'
import { BINARY, buildBinary, startBinary, type RunningBinary } from '../support/binary.ts'
import { captureIo, runCli } from '../support/cli.ts'
import { tempDir } from '../support/harness.ts'

let dir: string
let relay: RunningBinary
let me: string
let peer: string
const QUIET = { RELAY_PUBLISH_ENCRYPTION: 'false' }
const as = (key: string) => (args: string[], opts: { stdin?: string } = {}) => runCli([...args, '--relay', relay.url, '--key', key], { cwd: dir, env: QUIET, ...opts })
let cli: ReturnType<typeof as>
let peerCli: ReturnType<typeof as>
const sha256 = (b: Uint8Array | string) => new Bun.CryptoHasher('sha256').update(b).digest('hex')

beforeAll(async () => {
  await buildBinary()
  dir = tempDir('relay-cli-blobs-')
  relay = await startBinary({ cwd: dir, dataDir: join(dir, 'data') })
  me = (await runCli(['keygen', '--out', 'me.key'], { cwd: dir })).stdout.trim()
  peer = (await runCli(['keygen', '--out', 'peer.key'], { cwd: dir })).stdout.trim()
  cli = as('me.key')
  peerCli = as('peer.key')
  await peerCli(['whoami']) // the peer exists
}, 120_000) // builds the binary when this file runs alone
afterAll(async () => {
  relay.proc.kill('SIGTERM')
  await relay.proc.exited
  rmSync(dir, { recursive: true, force: true })
})

describe('upload and download', () => {
  test('upload prints the blob; --json prints the relay result; the same file twice is the same blob', async () => {
    const bytes = crypto.getRandomValues(new Uint8Array(50_000))
    writeFileSync(join(dir, 'data.bin'), bytes)
    const r = await cli(['upload', 'data.bin'])
    expect(r.stderr).toBe('') // piped: no progress bar
    expect(r.code).toBe(0)
    expect(r.stdout).toMatch(/^blob          blob_[0-9a-f]{24}\n/)
    expect(r.stdout).toContain('size          49 KiB (50000 bytes)\n')
    expect(r.stdout).toContain(`sha256        ${sha256(bytes)}\n`)
    expect(r.stdout).toContain('content type  application/octet-stream\n')
    const j = JSON.parse((await cli(['upload', 'data.bin', '--json'])).stdout)
    expect(Object.keys(j)).toEqual(['blob_id', 'hash', 'size', 'content_type', 'created_at', 'expires_at'])
    expect(r.stdout).toContain(j.blob_id)
  })

  test('the content type comes from the file name unless given', async () => {
    writeFileSync(join(dir, 'notes.txt'), 'some notes')
    expect(JSON.parse((await cli(['upload', 'notes.txt', '--json'])).stdout).content_type).toStartWith('text/plain')
    expect(JSON.parse((await cli(['upload', 'notes.txt', '--json', '--content-type', 'text/markdown'])).stdout).content_type).toBe('text/plain;charset=utf-8')
    writeFileSync(join(dir, 'notes2.txt'), 'other notes')
    expect(JSON.parse((await cli(['upload', 'notes2.txt', '--json', '--content-type', 'text/markdown'])).stdout).content_type).toBe('text/markdown')
  })

  test('download -o FILE writes the exact bytes; -o - writes them to standard output', async () => {
    const bytes = crypto.getRandomValues(new Uint8Array(300_000))
    writeFileSync(join(dir, 'src.bin'), bytes)
    const blob = JSON.parse((await cli(['upload', 'src.bin', '--json'])).stdout)
    const r = await cli(['download', blob.blob_id, '-o', 'copy.bin'])
    expect(r.stderr).toBe('')
    expect(r.code).toBe(0)
    expect(r.stdout).toContain('wrote         copy.bin\n')
    expect(sha256(readFileSync(join(dir, 'copy.bin')))).toBe(sha256(bytes))
    expect(readdirSync(dir).filter((n) => n.includes('.part-'))).toEqual([])
    const j = JSON.parse((await cli(['download', blob.blob_id, '--out', 'copy2.bin', '--json'])).stdout)
    expect(j).toEqual({ blob_id: blob.blob_id, file: 'copy2.bin', size: 300_000, content_type: 'application/octet-stream', hash: sha256(bytes) })
    const proc = spawn([BINARY, 'download', blob.blob_id, '-o', '-', '--relay', relay.url, '--key', 'me.key'], { cwd: dir, stdout: 'pipe', stderr: 'pipe', env: { PATH: process.env.PATH ?? '' } })
    const out = new Uint8Array(await new Response(proc.stdout).arrayBuffer())
    expect(await proc.exited).toBe(0)
    expect(sha256(out)).toBe(sha256(bytes))
  })

  test('errors: an unknown blob, a missing --out, a missing file', async () => {
    const r = await cli(['download', 'blob_' + '0'.repeat(24), '-o', 'never.bin'])
    expect(r.code).toBe(1)
    expect(r.stderr).toMatch(/^relay: error: .+ \(code blob_not_found, request req_\S+\)\n$/)
    expect(existsSync(join(dir, 'never.bin'))).toBe(false)
    expect(readdirSync(dir).filter((n) => n.startsWith('never.bin'))).toEqual([])
    expect((await cli(['download', 'blob_' + '0'.repeat(24)])).code).toBe(2)
    const missing = await cli(['upload', 'no-such-file'])
    expect(missing.code).toBe(2)
    expect(missing.stderr).toContain('cannot read no-such-file')
  })

  test('on a terminal the transfer draws a progress bar on standard error', async () => {
    writeFileSync(join(dir, 'tty.bin'), crypto.getRandomValues(new Uint8Array(200_000)))
    const io = captureIo(dir, { isTTY: true })
    const code = await runClientCommand(['upload', join(dir, 'tty.bin'), '--relay', relay.url, '--key', 'me.key'], io)
    expect(code).toBe(0)
    expect(io.err()).toContain('upload tty.bin [########################] 100% 195 KiB / 195 KiB')
    expect(io.err()).toEndWith('\n')
    const blobId = /blob_[0-9a-f]{24}/.exec(io.out())![0]
    const io2 = captureIo(dir, { isTTY: true })
    expect(await runClientCommand(['download', blobId, '-o', join(dir, 'tty-copy.bin'), '--relay', relay.url, '--key', 'me.key'], io2)).toBe(0)
    expect(io2.err()).toContain(`download ${blobId} [########################] 100%`)
  })

  test('on a terminal an encrypted transfer draws its bar too: ciphertext bytes up, plaintext bytes down', async () => {
    // 1000 bytes of plaintext are 1033 stored (17 + 1000 + 16): the two totals print differently. No
    // command here publishes peer's declaration (QUIET): later tests send it plaintext
    writeFileSync(join(dir, 'tty-enc.bin'), crypto.getRandomValues(new Uint8Array(1000)))
    const up = captureIo(dir, { isTTY: true, env: QUIET })
    expect(await runClientCommand(['upload', join(dir, 'tty-enc.bin'), '--encrypt-for', peer, '--relay', relay.url, '--key', 'me.key'], up)).toBe(0)
    expect(up.err()).toContain('encrypt+upload tty-enc.bin [########################] 100% 1.0 KiB / 1.0 KiB')
    expect(up.err()).toEndWith('\n')
    const ref = /send with\s+--blob (\S+)/.exec(up.out())![1]!
    const sent = captureIo(dir, { isTTY: true, env: QUIET })
    expect(await runClientCommand(['send', '--to', peer, '--blob', ref, '--json', '--relay', relay.url, '--key', 'me.key'], sent)).toBe(0)
    const messageId = JSON.parse(sent.out()).message_id
    const blobId = ref.split(':')[0]!
    const down = captureIo(dir, { isTTY: true, env: QUIET })
    expect(await runClientCommand(['download', blobId, '--message', messageId, '-o', join(dir, 'tty-enc.out'), '--relay', relay.url, '--key', 'peer.key'], down)).toBe(0)
    expect(down.err()).toContain(`download+decrypt ${blobId} [########################] 100% 1000 B / 1000 B`)
    expect(readFileSync(join(dir, 'tty-enc.out')).equals(readFileSync(join(dir, 'tty-enc.bin')))).toBe(true)
    // send --attach encrypts for a recipient that declares it, with the same bar
    const reader = (await runCli(['keygen', '--out', 'reader.key'], { cwd: dir })).stdout.trim()
    expect(await runClientCommand(['profile', 'set', '--encryption', 'accept', '--relay', relay.url, '--key', 'reader.key'], captureIo(dir))).toBe(0)
    const attach = captureIo(dir, { isTTY: true, env: QUIET })
    expect(await runClientCommand(['send', '--to', reader, '--attach', join(dir, 'tty-enc.bin'), '--relay', relay.url, '--key', 'me.key'], attach)).toBe(0)
    expect(attach.out()).toContain('end to end, v3')
    expect(attach.err()).toContain('encrypt+upload tty-enc.bin [########################] 100% 1.0 KiB / 1.0 KiB')
  })
})

describe('send and poll', () => {
  test('send --text with two --attach files; the recipient polls them and downloads one', async () => {
    writeFileSync(join(dir, 'report.txt'), 'the report')
    writeFileSync(join(dir, 'image.png'), crypto.getRandomValues(new Uint8Array(2000)))
    const s = await cli(['send', '--to', peer, '--text', 'see attached', '--attach', 'report.txt', '--attach', 'image.png', '--thread', 't-cli', '--ttl', '3600'])
    expect(s.stderr).toBe('')
    expect(s.code).toBe(0)
    expect(s.stdout).toMatch(/^message      msg_\d+_[0-9a-f]{12}\nstatus       sent\n/)
    expect(s.stdout).toMatch(/attachments  report\.txt \(blob_[0-9a-f]{24}\), image\.png \(blob_[0-9a-f]{24}\)\n/)
    const page = JSON.parse((await peerCli(['poll', '--json'])).stdout)
    expect(page.messages).toHaveLength(1)
    const m = page.messages[0]
    expect(m.body).toEqual({ text: 'see attached' })
    expect(m.thread_id).toBe('t-cli')
    expect(Date.parse(m.expires_at) - Date.parse(m.created_at)).toBe(3600_000)
    expect(m.attachments.map((a: any) => [a.filename, a.content_type, a.size])).toEqual([
      ['report.txt', 'text/plain;charset=utf-8', 10],
      ['image.png', 'image/png', 2000],
    ])
    const d = await peerCli(['download', m.attachments[0].blob_id, '-o', 'received.txt'])
    expect(d.code).toBe(0)
    expect(readFileSync(join(dir, 'received.txt'), 'utf8')).toBe('the report')
  })

  test('send --body from a file, --reply-to, --json; poll prints a table; usage errors', async () => {
    writeFileSync(join(dir, 'body.json'), JSON.stringify({ task: 'translate', n: 2 }))
    const first = JSON.parse((await peerCli(['send', '--to', me, '--text', 'question', '--json'])).stdout)
    const reply = JSON.parse((await cli(['send', '--to', peer, '--body', '@body.json', '--reply-to', first.message_id, '--json'])).stdout)
    expect(reply.status).toBe('sent')
    const table = await peerCli(['poll'])
    expect(table.stdout).toMatch(/^CREATED\s+FROM\s+STATUS\s+MESSAGE\s+ATTACHMENTS\s+BODY\n/)
    expect(table.stdout).toContain('{"task":"translate","n":2}')
    expect((await peerCli(['poll'])).stdout).toBe('no messages\n')
    for (const args of [['send', '--text', 'x'], ['send', '--to', peer], ['send', '--to', 'short', '--text', 'x'], ['send', '--to', peer, '--text', 'a', '--body', '1'], ['send', '--to', peer, '--body', '{'], ['send', '--to', peer, '--text', 'x', '--ttl', '0'], ['poll', '--status', 'new'], ['poll', '--follow', '--status', 'delivered']]) {
      const r = await cli(args)
      expect([args.join(' '), r.code]).toEqual([args.join(' '), 2])
    }
  })

  test('send --body sends the bytes given: a number beyond 2^53, escapes and key order arrive unchanged', async () => {
    const body = '{"n":9007199254740993,"z":1,"a":"caf\\u00e9","x":1.10}'
    const sent = JSON.parse((await cli(['send', '--to', peer, '--body', body, '--thread', 'exact', '--json'])).stdout)
    const { RelayClient, decodeKeyFile } = await import('../../src/client/index.ts')
    const reader = new RelayClient({ baseUrl: relay.url, keys: decodeKeyFile(readFileSync(join(dir, 'peer.key'), 'utf8')) })
    const raw = await (await reader.transport.send('GET', `/v1/messages/${sent.message_id}`)).text()
    expect(raw).toContain(`"body":${body}`)
    expect(raw).toContain('"thread_id":"exact"')
    // from a file too, surrounding whitespace aside
    writeFileSync(join(dir, 'exact.json'), `  ${body}\n`)
    const again = JSON.parse((await cli(['send', '--to', peer, '--body', '@exact.json', '--json'])).stdout)
    expect(await (await reader.transport.send('GET', `/v1/messages/${again.message_id}`)).text()).toContain(`"body":${body}`)
  })

  test('poll --follow prints each new message as one JSON line', async () => {
    const proc = spawn([BINARY, 'poll', '--follow', '--interval', '0.1', '--relay', relay.url, '--key', 'peer.key'], { cwd: dir, stdout: 'pipe', stderr: 'pipe', env: { PATH: process.env.PATH ?? '' } })
    try {
      await cli(['send', '--to', peer, '--text', 'one'])
      await cli(['send', '--to', peer, '--text', 'two'])
      const reader = proc.stdout.getReader()
      let text = ''
      const deadline = Date.now() + 5000
      while (text.split('\n').length < 3 && Date.now() < deadline) {
        const { value, done } = await reader.read()
        if (done) break
        text += new TextDecoder().decode(value)
      }
      const lines = text.trim().split('\n').map((l) => JSON.parse(l))
      expect(lines.map((m) => m.body.text)).toEqual(['one', 'two'])
      expect(lines.every((m) => m.status === 'delivered')).toBe(true)
    } finally {
      proc.kill()
      await proc.exited
    }
  })
})
