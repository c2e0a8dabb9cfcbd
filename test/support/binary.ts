/**
 * Builds dist/relay once per test run (a lock directory serializes concurrent test files) and starts
 * it as a real process on a temp data dir and a free port.
 */
import { spawn, spawnSync, type Subprocess } from 'bun'
import { existsSync, mkdirSync, readdirSync, rmdirSync, rmSync, statSync } from 'node:fs'
import { createServer } from 'node:net'
import { join, resolve } from 'node:path'

export const ROOT = resolve(import.meta.dir, '../..')
export const BINARY = join(ROOT, 'dist', 'relay')
const STAMP_ENV = 'RELAY_TEST_BINARY_BUILT'

/** The newest modification time of what the binary is built from (sources, migrations, dependencies). */
function newestSourceMs(): number {
  let newest = 0
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name)
      if (entry.isDirectory()) walk(path)
      else newest = Math.max(newest, statSync(path).mtimeMs)
    }
  }
  for (const dir of ['src', 'migrations']) walk(join(ROOT, dir))
  for (const file of ['package.json', 'package-lock.json']) if (existsSync(join(ROOT, file))) newest = Math.max(newest, statSync(join(ROOT, file)).mtimeMs)
  return newest
}

/**
 * Builds the binary unless it is newer than every source file (`npm test` builds it first, so the
 * test files' setup hooks, which have a short time limit, find it ready).
 */
export async function buildBinary(): Promise<string> {
  if (process.env[STAMP_ENV] === '1' && existsSync(BINARY)) return BINARY
  const lock = join(ROOT, 'dist', '.build-lock')
  mkdirSync(join(ROOT, 'dist'), { recursive: true })
  for (let i = 0; ; i++) {
    try {
      mkdirSync(lock)
      break
    } catch {
      if (i > 600) throw new Error('timed out waiting for another binary build')
      await Bun.sleep(100)
    }
  }
  try {
    const fresh = existsSync(BINARY) && statSync(BINARY).mtimeMs > newestSourceMs()
    if (!fresh) {
      const r = spawnSync([process.execPath, 'build', '--compile', '--minify', '--sourcemap', '--bytecode', join(ROOT, 'src/main.ts'), '--outfile', BINARY], { cwd: ROOT, stderr: 'pipe' })
      if (r.exitCode !== 0) throw new Error(`bun build failed: ${r.stderr.toString()}`)
    }
  } finally {
    rmdirSync(lock)
  }
  process.env[STAMP_ENV] = '1'
  return BINARY
}

export async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const srv = createServer()
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port
      srv.close(() => resolvePort(port))
    })
    srv.on('error', reject)
  })
}

export interface RunningBinary {
  proc: Subprocess<'ignore', 'pipe', 'pipe'>
  url: string
  port: number
  /** Everything printed on stdout so far (JSON lines). */
  stdout: () => string
}

/** Starts the binary from `cwd` and waits until /v1/health/ready answers 200. */
export async function startBinary(opts: { cwd: string; dataDir: string; env?: Record<string, string>; args?: string[]; port?: number }): Promise<RunningBinary> {
  const port = opts.port ?? (await freePort())
  const proc = spawn([BINARY, 'serve', '--port', String(port), '--data-dir', opts.dataDir, ...(opts.args ?? [])], {
    cwd: opts.cwd,
    env: { PATH: process.env.PATH ?? '', RELAY_LOG_LEVEL: 'info', ...opts.env },
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: 'pipe',
  })
  let out = ''
  void (async () => {
    for await (const chunk of proc.stdout) out += new TextDecoder().decode(chunk)
  })()
  const url = `http://127.0.0.1:${port}`
  const deadline = Date.now() + 10_000
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`relay exited with ${proc.exitCode}: ${await new Response(proc.stderr).text()}`)
    try {
      const res = await fetch(`${url}/v1/health/ready`)
      if (res.status === 200) break
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      proc.kill(9)
      throw new Error('relay did not become ready within 10 s')
    }
    await Bun.sleep(20)
  }
  return { proc, url, port, stdout: () => out }
}

/** Stops a binary started by `startBinary` (SIGTERM, then waits for it) and removes its directory. */
export async function stopBinary(relay: RunningBinary | undefined, dir: string | undefined): Promise<void> {
  relay?.proc.kill('SIGTERM')
  await relay?.proc.exited
  if (dir) rmSync(dir, { recursive: true, force: true })
}
