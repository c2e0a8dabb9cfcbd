/**
 * A real PostgreSQL server for tests: Debian's postgresql binaries, run as the `postgres` user (initdb
 * refuses root) in a temp directory that user owns, on a free port of 127.0.0.1, fsync off. Suites get
 * a fresh database each with `createDatabase`. Without the binaries `findPostgres()` is null and the
 * suite skips with one line (under CI=true it fails: see requires.ts).
 */
import { SQL } from 'bun'
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { requireProgram } from './requires.ts'

export interface TestPostgres {
  /** postgres://postgres@127.0.0.1:port/postgres */
  url: string
  port: number
  /** The server's data directory. */
  dataDir: string
  /** A new, empty database; returns its URL. */
  createDatabase(name: string): Promise<string>
  /** Stops the server (the data directory is kept until `remove`). */
  stop(): Promise<void>
  /** Starts it again on the same port and data. */
  start(): Promise<void>
  /** Stops the server and removes its data. */
  remove(): Promise<void>
}

/** The bin directory of the newest installed PostgreSQL, or null. */
export function findPostgres(): string | null {
  const root = '/usr/lib/postgresql'
  if (!existsSync(root)) return null
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a))
  return versions.length ? join(root, versions[0], 'bin') : null
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const port = (server.address() as { port: number }).port
      server.close(() => resolve(port))
    })
  })
}

function asPostgres(args: string[]): string[] {
  return process.getuid?.() === 0 ? ['runuser', '-u', 'postgres', '--', ...args] : args
}

async function run(args: string[]): Promise<void> {
  const proc = Bun.spawn(asPostgres(args), { stdout: 'pipe', stderr: 'pipe' })
  const [code, out, err] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()])
  if (code !== 0) throw new Error(`${args[0]} failed (${code}): ${err || out}`)
}

/**
 * Stops the server and removes its directory once this test process is gone, however it ends (an
 * exit hook does not run when the runner is killed): a detached shell that polls for our pid.
 */
function watchdog(bin: string, data: string, dir: string): void {
  const stop = asPostgres([join(bin, 'pg_ctl'), '-D', data, '-m', 'immediate', 'stop']).map((a) => `'${a}'`).join(' ')
  const script = `while kill -0 ${process.pid} 2>/dev/null; do sleep 1; done; [ -d '${data}' ] && ${stop} >/dev/null 2>&1; rm -rf '${dir}'`
  // a session of its own (setsid), so that a signal to this process group (Ctrl-C) does not take it along
  const setsid = Bun.which('setsid')
  const proc = Bun.spawn(setsid ? [setsid, 'sh', '-c', script] : ['sh', '-c', script], { stdin: 'ignore', stdout: 'ignore', stderr: 'ignore' })
  proc.unref()
}

export async function startPostgres(bin: string): Promise<TestPostgres> {
  const dir = mkdtempSync(join(tmpdir(), 'relay-pg-'))
  chmodSync(dir, 0o777)
  const data = join(dir, 'data')
  const chown = Bun.spawnSync(['chown', 'postgres:postgres', dir])
  if (process.getuid?.() === 0 && chown.exitCode !== 0) throw new Error(`chown ${dir} failed`)
  await run([join(bin, 'initdb'), '-D', data, '-U', 'postgres', '--auth=trust', '--no-sync', '--locale=C.UTF-8', '--encoding=UTF8'])
  const port = await freePort()
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`
  const start = async () => {
    await run([
      join(bin, 'pg_ctl'), '-D', data, '-l', join(dir, 'log'), '-w', '-t', '30', 'start',
      '-o', `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c max_connections=200`,
    ])
  }
  const stop = async () => {
    await run([join(bin, 'pg_ctl'), '-D', data, '-w', '-t', '30', '-m', 'fast', 'stop']).catch(() => {})
  }
  await start()
  watchdog(bin, data, dir)
  let counter = 0
  return {
    url,
    port,
    dataDir: data,
    async createDatabase(name: string) {
      const db = `${name.replace(/[^a-z0-9_]/gi, '_').toLowerCase()}_${++counter}_${process.pid}`
      const admin = new SQL({ url, max: 1 })
      try {
        await admin.unsafe(`CREATE DATABASE "${db}"`)
      } finally {
        await admin.close()
      }
      return `postgres://postgres@127.0.0.1:${port}/${db}`
    },
    stop,
    start,
    async remove() {
      await stop()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

/** The PostgreSQL bin directory, or null after one line saying the suite is skipped (under CI=true: throws). */
export function postgresRunner(purpose: string): string | null {
  const bin = findPostgres()
  return requireProgram('postgresql', bin, purpose) ? bin : null
}

let shared: Promise<TestPostgres> | null = null

/** One server for every suite of this test process that only needs databases; stopped once the process is gone. */
export function sharedPostgres(bin: string): Promise<TestPostgres> {
  if (!shared) {
    shared = startPostgres(bin)
  }
  return shared
}
