/**
 * A real S3-compatible server for tests: the `s3rver` npm package (pinned in package.json) run by Node
 * as a child process on a free port with a temp directory and one bucket. Node comes with npm, so it is
 * there wherever `npm test` runs; under plain `bun test` on a machine without it the S3 suites print
 * one line and skip (under CI=true they fail instead).
 *
 * s3rver speaks the S3 REST API (multipart uploads, CopyObject, ranged GET, ListObjectsV2 with
 * continuation tokens) but does not check Signature V4 signatures: the signing code is checked
 * separately (test/blobs/s3-sigv4.test.ts).
 */
import { spawn, type Subprocess } from 'bun'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import type { S3Env } from '../../src/blobs/s3/s3-location.ts'
import { requireProgram } from './requires.ts'

const S3RVER = resolve(import.meta.dir, '../../node_modules/s3rver/bin/s3rver.js')
/** s3rver's built-in account. */
const ACCESS_KEY = 'S3RVER'
const SECRET_KEY = 'S3RVER'

export interface S3Server {
  /** http://127.0.0.1:PORT */
  endpoint: string
  bucket: string
  /** The AWS variables that point a client at this server. */
  env: S3Env
  /** The directory where s3rver keeps the bucket's objects (for tests that read what was stored). */
  dir: string
  /** `s3://bucket/<prefix>`: each test may take its own prefix in the one bucket. */
  url(prefix?: string): string
  stop(): Promise<void>
}

/** The node program that runs s3rver, or null (after printing why) when the suite must be skipped. */
export function s3ServerRunner(purpose: string): string | null {
  const node = Bun.which('node')
  return requireProgram('node', node, `${purpose} (s3rver runs on Node)`) ? node : null
}

/** Starts s3rver on a free port with a new temp directory and the bucket `bucket`. */
export async function startS3Server(node: string, bucket = 'relay-test'): Promise<S3Server> {
  const dir = mkdtempSync(join(tmpdir(), 'relay-s3rver-'))
  // s3rver's ListObjectsV2 continuation tokens use DES, which OpenSSL 3 (Node ≥ 17) keeps in its legacy provider
  const major = Number(/^v?(\d+)/.exec(Bun.spawnSync([node, '--version']).stdout.toString())?.[1] ?? 0)
  const flags = major >= 17 ? ['--openssl-legacy-provider'] : []
  const proc: Subprocess<'ignore', 'pipe', 'pipe'> = spawn([node, ...flags, S3RVER, '--silent', '--directory', dir, '--address', '127.0.0.1', '--port', '0', '--configure-bucket', bucket], {
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: 'pipe',
  })
  let stderr = ''
  void drain(proc.stderr, (text) => (stderr = (stderr + text).slice(-4000)))
  const port = await listeningPort(proc).catch(async (err) => {
    proc.kill('SIGKILL')
    await proc.exited
    rmSync(dir, { recursive: true, force: true })
    throw new Error(`s3rver did not start: ${(err as Error).message}; stderr: ${stderr}`)
  })
  const endpoint = `http://127.0.0.1:${port}`
  return {
    endpoint,
    bucket,
    dir,
    env: { AWS_ENDPOINT_URL_S3: endpoint, AWS_REGION: 'us-east-1', AWS_ACCESS_KEY_ID: ACCESS_KEY, AWS_SECRET_ACCESS_KEY: SECRET_KEY },
    url: (prefix = '') => `s3://${bucket}/${prefix}`,
    async stop() {
      proc.kill('SIGTERM')
      const killer = setTimeout(() => proc.kill('SIGKILL'), 5000)
      await proc.exited
      clearTimeout(killer)
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

/** Reads stdout until s3rver prints `S3rver listening on ADDRESS:PORT` (within 30 s). */
async function listeningPort(proc: Subprocess<'ignore', 'pipe', 'pipe'>): Promise<number> {
  const reader = proc.stdout.getReader()
  const decoder = new TextDecoder()
  let text = ''
  const timer = setTimeout(() => proc.kill('SIGKILL'), 30_000)
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) throw new Error(`exited (code ${await proc.exited}) before listening; stdout: ${text.slice(0, 500)}`)
      text += decoder.decode(value, { stream: true })
      const m = /listening on \S+:(\d+)/.exec(text)
      if (m) return Number(m[1])
    }
  } finally {
    clearTimeout(timer)
    reader.releaseLock()
    // the rest of stdout is not needed; keep the pipe drained so s3rver never blocks on it
    void drain(proc.stdout, () => {})
  }
}

async function drain(stream: ReadableStream<Uint8Array>, onText: (text: string) => void): Promise<void> {
  const decoder = new TextDecoder()
  try {
    for await (const chunk of stream as unknown as AsyncIterable<Uint8Array>) onText(decoder.decode(chunk, { stream: true }))
  } catch {
    // closed
  }
}
