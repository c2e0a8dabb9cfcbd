/** Runs the built `relay` binary as a command-line client and collects what it printed. */
import { spawn } from 'bun'
import { BINARY } from './binary.ts'

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
