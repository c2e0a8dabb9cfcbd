/** Which local files the MCP tools may read and write, judged on real files, directories and symlinks. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { chmodSync, chownSync, mkdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { encodeKeyFile, generateKeyPair } from '../../src/auth/sign.ts'
import { FilePolicy, FileRefusedError, defaultFilesDir, ensurePrivateDir, sanitizeFileName } from '../../src/mcp/file-policy.ts'
import { tempDir } from '../support/harness.ts'

let base: string
let files: string
let outside: string
const keys = generateKeyPair()
let keyFile: string

const policy = (opts: { allowOverwrite?: boolean; roots?: string[] } = {}) =>
  FilePolicy.create({ roots: opts.roots ?? [files], keyFile, seed: keys.seed, allowOverwrite: opts.allowOverwrite ?? false, env: { HOME: base } })

const refused = async (p: Promise<unknown>, words: string) => {
  const err = await p.then(
    () => null,
    (e) => e,
  )
  expect(err).toBeInstanceOf(FileRefusedError)
  expect((err as Error).message).toContain(words)
}

beforeAll(() => {
  base = tempDir('relay-mcp-policy-')
  files = join(base, 'work')
  outside = join(base, 'elsewhere')
  mkdirSync(files)
  mkdirSync(outside)
  keyFile = join(files, 'agent.key')
  writeFileSync(keyFile, encodeKeyFile(keys), { mode: 0o600 })
  writeFileSync(join(files, 'notes.txt'), 'hello\n')
  writeFileSync(join(outside, 'secret.txt'), 'not yours\n')
})
afterAll(() => rmSync(base, { recursive: true, force: true }))

describe('reading (uploads and attachments)', () => {
  test('a file inside the files directory is read, by relative or absolute path', async () => {
    const p = await policy()
    expect(await p.readable('notes.txt')).toBe(join(files, 'notes.txt'))
    expect(await p.readable(join(files, 'notes.txt'))).toBe(join(files, 'notes.txt'))
  })

  test('--files is repeatable: each directory may be read; downloads without a path go to the first', async () => {
    const second = join(base, 'second')
    mkdirSync(second, { recursive: true })
    writeFileSync(join(second, 'data.csv'), 'a,b\n')
    const p = await policy({ roots: [files, second] })
    expect(p.roots).toEqual([files, second])
    expect(await p.readable(join(second, 'data.csv'))).toBe(join(second, 'data.csv'))
    expect((await p.writable(undefined, 'in.txt', false)).target).toBe(join(files, 'in.txt'))
    expect((await p.writable(second, 'in.txt', false)).target).toBe(join(second, 'in.txt'))
    await refused(p.readable(join(outside, 'secret.txt')), 'outside the directories')
  })

  test('outside the files directories is refused: /etc/passwd, ../, an absolute path elsewhere', async () => {
    const p = await policy()
    await refused(p.readable('/etc/passwd'), 'outside the directories')
    await refused(p.readable('../elsewhere/secret.txt'), 'outside the directories')
    await refused(p.readable(join(outside, 'secret.txt')), 'outside the directories')
  })

  test('a symlink inside that points outside is refused; one that stays inside is followed', async () => {
    symlinkSync(join(outside, 'secret.txt'), join(files, 'escape.txt'))
    symlinkSync(outside, join(files, 'escape-dir'))
    symlinkSync(join(files, 'notes.txt'), join(files, 'alias.txt'))
    const p = await policy()
    await refused(p.readable('escape.txt'), 'outside the directories')
    await refused(p.readable('escape-dir/secret.txt'), 'outside the directories')
    expect(await p.readable('alias.txt')).toBe(join(files, 'notes.txt'))
  })

  test("the agent's key file is never read, under any name or through a symlink", async () => {
    const p = await policy()
    await refused(p.readable('agent.key'), "this agent's key file")
    symlinkSync(keyFile, join(files, 'innocent.txt'))
    await refused(p.readable('innocent.txt'), "this agent's key file")
    writeFileSync(join(files, 'copy.json'), encodeKeyFile(keys))
    await refused(p.readable('copy.json'), 'private_key')
    writeFileSync(join(files, 'seed.txt'), `my seed is ${Buffer.from(keys.seed).toString('base64url')} ok`)
    await refused(p.readable('seed.txt'), "this agent's private key")
  })

  test('anything that looks like a private key is refused', async () => {
    const p = await policy()
    const cases: Array<[string, string | Uint8Array, string]> = [
      ['id_ed25519', 'whatever', 'named like a private key'],
      ['server.pem', 'x', 'named like a private key'],
      ['raw.key', new Uint8Array(32).fill(7), 'named like a private key'],
      ['blob.bin', new Uint8Array(64).fill(200), '64 bytes of raw data'],
      ['pem.txt', '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEA\n-----END OPENSSH PRIVATE KEY-----\n', 'holds a private key'],
      ['rsa.txt', 'junk\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\n', 'holds a private key'],
      ['hex.txt', `${'ab'.repeat(32)}\n`, 'single 32- or 64-byte secret'],
      ['b64.txt', Buffer.alloc(32, 9).toString('base64'), 'single 32- or 64-byte secret'],
      ['other-agent.json', encodeKeyFile(generateKeyPair()), 'private_key'],
    ]
    for (const [name, content, words] of cases) {
      writeFileSync(join(files, name), content)
      await refused(p.readable(name), words)
    }
    // text of the same sizes is fine
    writeFileSync(join(files, 'short.txt'), 'a plain sentence of 32 bytes!!\n\n')
    expect(await p.readable('short.txt')).toBe(join(files, 'short.txt'))
  })

  test('a key deep inside a large file is found, across the border of two read windows too', async () => {
    const p = await policy()
    const pem = '-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n-----END EC PRIVATE KEY-----\n'
    const seed = Buffer.from(keys.seed).toString('hex')
    const filler = (n: number) => 'log line, nothing to see\n'.repeat(Math.ceil(n / 25)).slice(0, n)
    const cases: Array<[string, string, string]> = [
      ['deep-pem.log', filler(300_000) + pem + filler(1000), 'holds a private key'],
      ['border-pem.log', filler(64 * 1024 - 10) + pem, 'holds a private key'],
      ['deep-seed.log', filler(200_000) + seed + filler(10), "contains this agent's private key"],
      ['border-seed.log', filler(128 * 1024 - 30) + seed, "contains this agent's private key"],
    ]
    for (const [name, content, words] of cases) {
      writeFileSync(join(files, name), content)
      await refused(p.readable(name), words)
    }
    writeFileSync(join(files, 'big-clean.log'), filler(500_000))
    expect(await p.readable('big-clean.log')).toBe(join(files, 'big-clean.log'))
  })

  test('files in a directory of secrets (.ssh) are refused even inside an allowed root', async () => {
    mkdirSync(join(files, '.ssh'))
    writeFileSync(join(files, '.ssh', 'config'), 'Host x\n')
    await refused((await policy()).readable('.ssh/config'), 'directory of secrets')
  })
})

describe('writing (downloads)', () => {
  test('default: the first files directory, under the given name; missing directories inside are created', async () => {
    const p = await policy()
    expect(await p.writable(undefined, 'report.pdf', false)).toEqual({ target: join(files, 'report.pdf'), replaces: false })
    expect((await p.writable('sub/dir/', 'a.txt', false)).target).toBe(join(files, 'sub', 'dir'))
    expect(statSync(join(files, 'sub')).mode & 0o777).toBe(0o700)
  })

  test('outside, and through a symlink to outside, is refused (and nothing is created there)', async () => {
    const p = await policy()
    await refused(p.writable('/etc/cron.d/evil', 'x', false), 'outside the directories')
    await refused(p.writable('escape-dir/new.txt', 'x', false), 'outside the directories')
    await refused(p.writable('../elsewhere/made/x.txt', 'x', false), 'outside the directories')
    expect(() => statSync(join(outside, 'made'))).toThrow()
    await refused(p.writable('escape.txt', 'x', true), 'symlink')
  })

  test('an existing file is replaced only when the user allows it and the call asks', async () => {
    const strict = await policy()
    await refused(strict.writable('notes.txt', 'x', false), 'already exists')
    await refused(strict.writable('notes.txt', 'x', true), 'does not replace files')
    const lenient = await policy({ allowOverwrite: true })
    await refused(lenient.writable('notes.txt', 'x', false), 'overwrite: true')
    expect(await lenient.writable('notes.txt', 'x', true)).toEqual({ target: join(files, 'notes.txt'), replaces: true })
    await refused(lenient.writable('agent.key', 'x', true), 'key file')
    await refused(lenient.writable('alias.txt', 'x', true), 'symlink')
    expect(readFileSync(join(files, 'notes.txt'), 'utf8')).toBe('hello\n')
  })

  test('sender file names are made safe', () => {
    expect(sanitizeFileName('../../.bashrc', 'blob_1')).toBe('bashrc')
    expect(sanitizeFileName('a\\b\\c.txt', 'blob_1')).toBe('c.txt')
    expect(sanitizeFileName('evil\u0000\n.txt', 'blob_1')).toBe('evil.txt')
    expect(sanitizeFileName('..', 'blob_1')).toBe('blob_1')
    expect(sanitizeFileName(undefined, 'blob_1')).toBe('blob_1')
    expect(Buffer.byteLength(sanitizeFileName(`${'é'.repeat(300)}.tar.gz`, 'b'))).toBeLessThanOrEqual(200)
    expect(sanitizeFileName(`${'é'.repeat(300)}.gz`, 'b').endsWith('.gz')).toBe(true)
  })
})

describe('the private default directory', () => {
  test('is created 0700 under XDG_DATA_HOME (or ~/.local/share), never under the temp dir', async () => {
    const xdg = join(base, 'xdg')
    expect(defaultFilesDir({ XDG_DATA_HOME: xdg })).toBe(join(xdg, 'agent-relay', 'mcp-files'))
    expect(defaultFilesDir({ HOME: '/home/u' })).toBe('/home/u/.local/share/agent-relay/mcp-files')
    expect(defaultFilesDir({ HOME: '/home/u', XDG_DATA_HOME: 'relative' })).toBe('/home/u/.local/share/agent-relay/mcp-files')
    const p = await FilePolicy.create({ roots: [], keyFile, allowOverwrite: false, env: { XDG_DATA_HOME: xdg } })
    expect(p.roots).toEqual([join(xdg, 'agent-relay', 'mcp-files')])
    expect(statSync(p.roots[0]).mode & 0o777).toBe(0o700)
  })

  test('a pre-created directory open to others, or a symlink in its place, is refused', async () => {
    const open = join(base, 'open')
    mkdirSync(open)
    chmodSync(open, 0o755)
    await refused(ensurePrivateDir(open), 'open to other users')
    symlinkSync(outside, join(base, 'planted'))
    await refused(ensurePrivateDir(join(base, 'planted')), 'not a directory')
  })

  test('in a directory others may write to, it is refused unless that directory is sticky', async () => {
    const shared = join(base, 'shared')
    mkdirSync(shared)
    chmodSync(shared, 0o777)
    await refused(ensurePrivateDir(join(shared, 'mcp-files')), 'writable by other users')
    expect(() => statSync(join(shared, 'mcp-files'))).toThrow()
    // like /tmp: others may create entries but not rename or remove ours
    chmodSync(shared, 0o1777)
    expect(await ensurePrivateDir(join(shared, 'mcp-files'))).toBe(join(shared, 'mcp-files'))
    // the default path whose parent someone left open, as XDG_DATA_HOME
    const xdg = join(base, 'xdg-open')
    mkdirSync(join(xdg, 'agent-relay'), { recursive: true })
    chmodSync(join(xdg, 'agent-relay'), 0o777)
    await refused(FilePolicy.create({ roots: [], keyFile, allowOverwrite: false, env: { XDG_DATA_HOME: xdg } }), 'writable by other users')
  })

  test.skipIf(process.getuid?.() !== 0)("another user's directory in its place, or above it, is refused (needs root to plant one)", async () => {
    const planted = join(base, 'theirs')
    mkdirSync(planted, { mode: 0o700 })
    chownSync(planted, 65534, 65534)
    await refused(ensurePrivateDir(planted), 'belongs to another user')
    await refused(ensurePrivateDir(join(planted, 'mcp-files')), 'belongs to another user')
  })
})
