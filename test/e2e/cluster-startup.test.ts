/**
 * Cluster settings that point nowhere: the compiled relay stops at start-up with one line naming the
 * database or the bucket it could not reach (never a stack trace, never the password).
 */
import { afterAll, expect, test } from 'bun:test'
import { rmSync } from 'node:fs'
import { spawn } from 'bun'
import { freePort } from '../support/binary.ts'
import { relayBinary, tempDataDir } from './binary.ts'

const dirs: string[] = []
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

async function serve(env: Record<string, string>) {
  const dataDir = tempDataDir()
  dirs.push(dataDir)
  const proc = spawn([await relayBinary(), 'serve', '--data-dir', dataDir, '--port', '0'], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const timer = setTimeout(() => proc.kill(9), 30_000)
  const [code, stdout, stderr] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()])
  clearTimeout(timer)
  return { code, stdout, stderr: stderr.trim() }
}

test('an unreachable database: exit 1 with one line naming it, without the password', async () => {
  const port = await freePort()
  const r = await serve({ RELAY_DATABASE_URL: `postgres://relay:s3cret-pw@127.0.0.1:${port}/relay` })
  expect(r.code).toBe(1)
  expect(r.stderr.split('\n')).toHaveLength(1)
  expect(r.stderr).toContain(`postgres://relay@127.0.0.1:${port}/relay`)
  expect(r.stderr).toContain('unreachable')
  expect(r.stderr + r.stdout).not.toContain('s3cret-pw')
})

test('an unreachable bucket: exit 1 with one line naming it', async () => {
  const port = await freePort()
  const r = await serve({
    RELAY_BLOB_STORE: 's3://relay-blobs/prod/',
    AWS_ENDPOINT_URL_S3: `http://127.0.0.1:${port}`,
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'key',
    AWS_SECRET_ACCESS_KEY: 'secret-key-value',
  })
  expect(r.code).toBe(1)
  expect(r.stderr.split('\n')).toHaveLength(1)
  expect(r.stderr).toContain('relay-blobs')
  expect(r.stderr).toContain(`127.0.0.1:${port}`)
  expect(r.stderr + r.stdout).not.toContain('secret-key-value')
})
