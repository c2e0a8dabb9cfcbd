/** Runs the built `relay` binary as a command-line client and collects what it printed. */
import { spawn } from 'bun'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { BINARY, buildBinary, startBinary, type RunningBinary } from './binary.ts'
import { tempDir } from './harness.ts'

export interface CliResult {
  code: number
  stdout: string
  stderr: string
}

/** Asynchronous on purpose: a relay or stub served by this test process must keep answering. */
export async function runCli(args: string[], opts: { cwd: string; env?: Record<string, string>; stdin?: string }): Promise<CliResult> {
  const proc = spawn([BINARY, ...args], {
    cwd: opts.cwd,
    env: { PATH: process.env.PATH ?? '', ...opts.env },
    stdin: opts.stdin === undefined ? 'ignore' : new Blob([opts.stdin]),
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const [code, stdout, stderr] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()])
  return { code, stdout, stderr }
}

/** Standard streams for running a command in process (runClientCommand). */
export function captureIo(cwd: string, opts: { env?: Record<string, string>; isTTY?: boolean } = {}) {
  let out = ''
  let err = ''
  return {
    cwd,
    env: opts.env ?? {},
    stdout: { write: (s: string) => (out += s) },
    stderr: { write: (s: string) => (err += s), isTTY: opts.isTTY ?? false, columns: 100 },
    out: () => out,
    err: () => err,
  }
}

export interface CliRelay {
  dir: string
  relay: RunningBinary
  /** The public key of `agent.key` in dir. */
  me: string
  /** Runs the binary from dir with --relay and --key agent.key appended. */
  cli(args: string[], env?: Record<string, string>): Promise<CliResult>
  close(): Promise<void>
}

/** The built relay on a temp directory, with a key file `agent.key` beside it, for command-line tests. */
export async function startCliRelay(prefix: string): Promise<CliRelay> {
  await buildBinary()
  const dir = tempDir(prefix)
  const relay = await startBinary({ cwd: dir, dataDir: join(dir, 'data') })
  const me = (await runCli(['keygen', '--out', 'agent.key'], { cwd: dir })).stdout.trim()
  return {
    dir,
    relay,
    me,
    cli: (args, env = {}) => runCli([...args, '--relay', relay.url, '--key', 'agent.key'], { cwd: dir, env }),
    async close() {
      relay.proc.kill('SIGTERM')
      await relay.proc.exited
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
