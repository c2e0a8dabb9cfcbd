/**
 * The compiled relay for end-to-end tests: built once per test run (`bun build --compile`, as
 * `npm run build` does) into a temp dir, and started on a temp data directory on a free port.
 */
import { spawn, type Subprocess } from 'bun'
import { mkdirSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const repoRoot = join(import.meta.dir, '..', '..')
let built: Promise<string> | undefined

/**
 * Path of the compiled binary; the first call of a test run builds it, later calls reuse it. It goes to
 * dist/e2e/ (ignored by git) and is overwritten by the next run, so no 100 MB copy is left behind.
 */
export function relayBinary(): Promise<string> {
  built ??= (async () => {
    const dir = join(repoRoot, 'dist', 'e2e')
    mkdirSync(dir, { recursive: true })
    const out = join(dir, 'relay')
    const proc = spawn([process.execPath, 'build', '--compile', 'src/main.ts', '--outfile', out], {
      cwd: repoRoot,
      stdout: 'pipe',
      stderr: 'pipe',
    })
    if ((await proc.exited) !== 0) throw new Error(`bun build --compile failed: ${await new Response(proc.stderr).text()}`)
    return out
  })()
  return built
}

export interface RunningRelay {
  proc: Subprocess<'ignore', 'pipe', 'pipe'>
  url: string
  port: number
  /** Log lines printed so far (JSON lines on stdout). */
  logs: string[]
  /** kill -9: no graceful stop, no WAL checkpoint. */
  crash(): Promise<void>
  /** SIGTERM and wait for exit. */
  stop(): Promise<number>
}

/**
 * Starts the binary on `dataDir` (port 0) and resolves once it has printed its start-up line. `prefix`
 * runs it under another program (e.g. faketime).
 */
export async function startBinary(dataDir: string, env: Record<string, string> = {}, prefix: string[] = []): Promise<RunningRelay> {
  const bin = await relayBinary()
  const proc = spawn([...prefix, bin, 'serve', '--data-dir', dataDir, '--port', '0', '--host', '127.0.0.1'], {
    cwd: dataDir,
    env: { PATH: process.env.PATH ?? '', RELAY_LOG_LEVEL: 'info', ...env },
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const logs: string[] = []
  let resolveStart: (port: number) => void = () => {}
  const started = new Promise<number>((resolve) => (resolveStart = resolve))
  // keep draining stdout so the relay never blocks on a full pipe
  void (async () => {
    let buf = ''
    for await (const chunk of proc.stdout as unknown as AsyncIterable<Uint8Array>) {
      buf += new TextDecoder().decode(chunk)
      let nl: number
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl)
        buf = buf.slice(nl + 1)
        logs.push(line)
        try {
          const entry = JSON.parse(line)
          if (entry.msg === 'relay started') resolveStart(entry.port)
        } catch {}
      }
    }
  })()
  const port = await Promise.race([
    started,
    proc.exited.then(async (code) => {
      throw new Error(`relay exited with ${code} before starting: ${await new Response(proc.stderr).text()}`)
    }),
    Bun.sleep(15_000).then(() => {
      throw new Error('relay did not start within 15 s')
    }),
  ])
  return {
    proc,
    url: `http://127.0.0.1:${port}`,
    port,
    logs,
    async crash() {
      proc.kill(9)
      await proc.exited
    },
    async stop() {
      proc.kill('SIGTERM')
      return proc.exited
    },
  }
}

export function tempDataDir(): string {
  return mkdtempSync(join(tmpdir(), 'relay-e2e-'))
}
