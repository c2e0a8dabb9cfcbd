/**
 * Which local files the MCP tools may touch. A tool argument is written by a model, and a model can be
 * talked into anything by a message from another agent, so the user decides here, once, on the command
 * line: tools read and write only inside the directories given with --files (default: one private
 * directory under the user's data directory). Every path is resolved with its symlinks before it is
 * judged; the agent's key file and anything that looks like a private key is never read for upload;
 * an existing file is replaced only when the user allowed it (--allow-overwrite) and the call asks.
 */
import { lstat, mkdir, open, realpath, stat } from 'node:fs/promises'
import { homedir } from 'node:os'
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path'

export class FileRefusedError extends Error {}

export interface FilePolicyOptions {
  /** Directories the tools may read from and write into (--files, in order); empty: the private default. */
  roots: string[]
  /** The agent's key file: never uploaded, whatever its name or place. */
  keyFile: string
  /** The agent's private key seed, to recognise a copy of it anywhere. */
  seed?: Uint8Array
  /** The user allows a download to replace an existing file (--allow-overwrite). */
  allowOverwrite: boolean
  env: Record<string, string | undefined>
}

/** Bytes of a file read at a time to judge whether it holds a private key (the first window decides the whole-file shapes). */
const SNIFF_BYTES = 64 * 1024
/** Characters kept from one window to the next, longer than any marker looked for, so none is missed at a border. */
const SCAN_OVERLAP = 256
/** Directory names whose content is secrets by convention. */
const SECRET_DIRS = new Set(['.ssh', '.gnupg', '.aws', '.kube', '.docker', '.password-store'])
/** File names that are private keys or credentials by convention. */
const SECRET_NAME = /(^id_(rsa|dsa|ecdsa|ed25519)(_sk)?$)|(\.(key|pem|p12|pfx|jks|keystore|ppk|asc|gpg|kdbx)$)|(^\.?(netrc|pgpass|git-credentials|npmrc|pypirc)$)|(^\.env(\..*)?$)|(^relay\.key$)/i
const PEM_PRIVATE = /-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----/
/** A whole file that is only a 32- or 64-byte secret written as hex, base64 or base64url. */
const TEXT_SEED = /^(?:[0-9a-fA-F]{64}|[0-9a-fA-F]{128}|[A-Za-z0-9+/_-]{43}=?|[A-Za-z0-9+/_-]{86}(?:==)?)$/

/** The default files directory: $XDG_DATA_HOME/agent-relay/mcp-files (or ~/.local/share/…). */
export function defaultFilesDir(env: Record<string, string | undefined>): string {
  const base = env.XDG_DATA_HOME && isAbsolute(env.XDG_DATA_HOME) ? env.XDG_DATA_HOME : join(env.HOME || homedir(), '.local', 'share')
  return join(base, 'agent-relay', 'mcp-files')
}

/**
 * Creates (or checks) the private directory: mode 0700, a real directory (not a symlink), owned by
 * this user, not readable or writable by others, in a directory no one else can rename entries of.
 * Someone else's directory at that place is refused, never used.
 */
export async function ensurePrivateDir(dir: string): Promise<string> {
  await mkdir(dirname(dir), { recursive: true, mode: 0o700 })
  // whoever may rename entries in the directory above could swap ours for theirs after it is checked:
  // that directory must be this user's (or root's), and writable by others only with the sticky bit
  const above = await stat(dirname(dir))
  const uid = process.getuid?.()
  if (uid !== undefined && above.uid !== uid && above.uid !== 0) throw new FileRefusedError(`${dirname(dir)} belongs to another user (uid ${above.uid}): pass --files DIR`)
  if ((above.mode & 0o022) !== 0 && (above.mode & 0o1000) === 0) {
    throw new FileRefusedError(`${dirname(dir)} is writable by other users (mode ${(above.mode & 0o777).toString(8)}): chmod go-w it or pass --files DIR`)
  }
  try {
    await mkdir(dir, { mode: 0o700 })
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
  }
  const info = await lstat(dir)
  if (info.isSymbolicLink() || !info.isDirectory()) throw new FileRefusedError(`${dir} is not a directory (a symlink or a file is there): remove it or pass --files DIR`)
  if (uid !== undefined && info.uid !== uid) throw new FileRefusedError(`${dir} belongs to another user (uid ${info.uid}): remove it or pass --files DIR`)
  if ((info.mode & 0o077) !== 0) throw new FileRefusedError(`${dir} is open to other users (mode ${(info.mode & 0o777).toString(8)}): chmod 700 it or pass --files DIR`)
  return realpath(dir)
}

/** A file name from another agent made safe to create: no directories, no control characters, not hidden. */
export function sanitizeFileName(name: string | undefined, fallback: string): string {
  let n = basename((name ?? '').replace(/\\/g, '/'))
    .replace(/[\u0000-\u001f\u007f]/g, '')
    .replace(/^[.\s]+/, '')
    .trim()
  if (Buffer.byteLength(n) > 200) {
    const dot = n.lastIndexOf('.')
    const ext = dot > 0 && n.length - dot <= 16 ? n.slice(dot) : ''
    while (Buffer.byteLength(n) > 200) n = n.slice(0, -1 - ext.length) + ext
  }
  return n === '' || n === '.' || n === '..' ? fallback : n
}

const inside = (root: string, path: string) => {
  const rel = relative(root, path)
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel) && rel.split(sep)[0] !== '..')
}

export class FilePolicy {
  private constructor(
    /** Real paths of the allowed directories; the first is where downloads go by default. */
    readonly roots: string[],
    private readonly keyFile: string | null,
    private readonly seedText: string[],
    readonly allowOverwrite: boolean,
    readonly isDefault: boolean,
  ) {}

  static async create(opts: FilePolicyOptions): Promise<FilePolicy> {
    const roots: string[] = []
    const isDefault = opts.roots.length === 0
    if (isDefault) roots.push(await ensurePrivateDir(defaultFilesDir(opts.env)))
    for (const dir of opts.roots) {
      let real: string
      try {
        real = await realpath(dir)
      } catch {
        throw new FileRefusedError(`--files ${dir}: no such directory`)
      }
      if (!(await stat(real)).isDirectory()) throw new FileRefusedError(`--files ${dir}: not a directory`)
      roots.push(real)
    }
    const keyFile = await realpath(opts.keyFile).catch(() => null)
    const seedText = opts.seed ? [Buffer.from(opts.seed).toString('base64url'), Buffer.from(opts.seed).toString('base64').replace(/=+$/, ''), Buffer.from(opts.seed).toString('hex')] : []
    return new FilePolicy(roots, keyFile, seedText, opts.allowOverwrite, isDefault)
  }

  /** Where downloads go when the call names no path. */
  get downloadDir(): string {
    return this.roots[0]
  }

  /** A tool's path: `~` is the home directory, a relative path is relative to the first files directory. */
  private absolute(path: string): string {
    if (path === '~' || path.startsWith('~/')) return join(homedir(), path.slice(1))
    return resolve(this.roots[0], path)
  }

  private refuseOutside(path: string, real: string): void {
    if (!this.roots.some((r) => inside(r, real))) {
      throw new FileRefusedError(
        `${path} is outside the directories this bridge may use (${this.roots.join(', ')}); the user can allow more with relay mcp --files DIR`,
      )
    }
    const parts = real.split(sep)
    for (let i = 0; i < parts.length; i++) {
      if (SECRET_DIRS.has(parts[i]) || SECRET_DIRS.has(`${parts[i]}/${parts[i + 1]}`)) throw new FileRefusedError(`${path} is in a directory of secrets (${parts[i]}): refused`)
    }
  }

  /** The real path of a file the tools may upload, or a FileRefusedError that says why not. */
  async readable(path: string): Promise<string> {
    const abs = this.absolute(path)
    // outside is refused before the file system is asked, so a refusal says nothing about what exists there
    this.refuseOutside(abs, abs)
    let real: string
    try {
      real = await realpath(abs)
    } catch (err) {
      throw new FileRefusedError(`cannot read ${abs}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}`)
    }
    this.refuseOutside(abs, real)
    const info = await stat(real)
    if (!info.isFile()) throw new FileRefusedError(`${abs} is not a regular file`)
    if (this.keyFile !== null && real === this.keyFile) throw new FileRefusedError(`${abs} is this agent's key file: it is never uploaded`)
    if (SECRET_NAME.test(basename(real))) throw new FileRefusedError(`${abs} is named like a private key or credentials file: it is never uploaded`)
    await this.refuseKeyContent(abs, real, info.size)
    return real
  }

  /**
   * Refuses a file whose bytes look like a private key: its first bytes a raw or encoded 32/64-byte seed
   * or a relay key file; anywhere in it, a PEM, PuTTY or PGP private key block or this agent's seed.
   */
  private async refuseKeyContent(path: string, real: string, size: number): Promise<void> {
    const refuse = (why: string) => {
      throw new FileRefusedError(`${path} ${why}: it is never uploaded`)
    }
    const handle = await open(real, 'r')
    try {
      const buf = Buffer.alloc(Math.min(size, SNIFF_BYTES))
      let { bytesRead } = await handle.read(buf, 0, buf.length, 0)
      const head = buf.subarray(0, bytesRead).toString('latin1')
      if ((size === 32 || size === 64) && /[^\t\n\r\x20-\x7e]/.test(head)) refuse(`is ${size} bytes of raw data, the size of a private key`)
      if (TEXT_SEED.test(head.trim())) refuse('is a single 32- or 64-byte secret in text')
      if (/"private_key"\s*:/.test(head)) refuse('looks like a key file (it has a private_key field)')
      // the rest of the file a window at a time, each overlapping the last by more than a marker's length
      let text = head
      let position = bytesRead
      for (;;) {
        if (PEM_PRIVATE.test(text) || text.includes('PuTTY-User-Key-File') || text.includes('-----BEGIN PGP PRIVATE KEY')) refuse('holds a private key')
        if (this.seedText.some((s) => text.includes(s))) refuse("contains this agent's private key")
        if (bytesRead < buf.length || position >= size) break
        ;({ bytesRead } = await handle.read(buf, 0, buf.length, position))
        if (bytesRead === 0) break
        position += bytesRead
        text = text.slice(-SCAN_OVERLAP) + buf.subarray(0, bytesRead).toString('latin1')
      }
    } finally {
      await handle.close()
    }
  }

  /**
   * Where a download may be written: `path` (a file, or a directory to put `name` in), default the
   * first files directory. Refuses outside the files directories, through a symlink, and over an
   * existing file unless overwrite was asked and the user allows it. Creates missing directories inside.
   */
  async writable(path: string | undefined, name: string, overwrite: boolean): Promise<{ target: string; replaces: boolean }> {
    let target = path === undefined ? join(this.downloadDir, name) : this.absolute(path)
    const existing = await lstat(target).catch(() => null)
    if (existing?.isDirectory()) target = join(target, name)
    // the nearest directory that exists decides, with its symlinks resolved
    let parent = dirname(target)
    const missing: string[] = []
    let realParent: string | null = null
    while (realParent === null) {
      realParent = await realpath(parent).catch(() => null)
      if (realParent === null) {
        missing.unshift(basename(parent))
        const up = dirname(parent)
        if (up === parent) throw new FileRefusedError(`${target}: no existing directory above it`)
        parent = up
      }
    }
    this.refuseOutside(target, join(realParent, ...missing, basename(target)))
    if (missing.length) await mkdir(join(realParent, ...missing), { recursive: true, mode: 0o700 })
    const real = join(await realpath(join(realParent, ...missing)), basename(target))
    this.refuseOutside(target, real)
    const info = await lstat(real).catch(() => null)
    if (info?.isSymbolicLink()) throw new FileRefusedError(`${target} is a symlink: downloads never write through one`)
    if (info?.isDirectory()) throw new FileRefusedError(`${target} is a directory`)
    if (info && this.keyFile !== null && real === this.keyFile) throw new FileRefusedError(`${target} is this agent's key file: it is never replaced`)
    if (info && !overwrite) throw new FileRefusedError(`${target} already exists: give another path${this.allowOverwrite ? ', or overwrite: true' : ''}`)
    if (info && !this.allowOverwrite) throw new FileRefusedError(`${target} already exists and this bridge does not replace files (the user can allow it with relay mcp --allow-overwrite)`)
    return { target: real, replaces: info !== null }
  }
}
