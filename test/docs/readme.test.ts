/**
 * README.md cannot go stale: its generated sections are rendered from the code, and its code examples
 * (signing in TypeScript, Python and shell; webhook receivers in TypeScript and Python; the curl test
 * delivery) are run against the worked examples and a live relay.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { spawn, spawnSync, type Subprocess } from 'bun'
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { bodyHash, canonicalString } from '../../src/auth/canonical.ts'
import { keyPairFromSeed, signRequest } from '../../src/auth/sign.ts'
import { OPTIONS } from '../../src/config/options.ts'
import vectors from '../fixtures/test-vectors.json'
import { ROOT, buildBinary, freePort, startBinary } from '../support/binary.ts'
import { tempDir } from '../support/harness.ts'
import { README_PATH, SECTIONS, replaceSection, sectionOf, snippet } from '../support/readme.ts'

let readme = readFileSync(README_PATH, 'utf8')
let dir: string
beforeAll(() => {
  dir = tempDir('relay-readme-')
})
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const hasPythonCryptography = () => Bun.which('python3') !== null && spawnSync(['python3', '-c', 'import cryptography']).exitCode === 0
const run = (cmd: string[], env: Record<string, string> = {}) => spawnSync(cmd, { cwd: dir, env: { PATH: process.env.PATH ?? '', ...env } })

describe('generated sections', () => {
  test('match what the code renders (UPDATE_README=1 rewrites them)', async () => {
    const rendered: Record<string, string> = {}
    for (const [name, render] of Object.entries(SECTIONS)) rendered[name] = await render()
    if (process.env.UPDATE_README === '1') {
      for (const [name, body] of Object.entries(rendered)) readme = replaceSection(readme, name, body)
      writeFileSync(README_PATH, readme)
    }
    for (const [name, body] of Object.entries(rendered)) {
      expect([name, sectionOf(readme, name)]).toEqual([name, body])
    }
  })

  test('the configuration reference lists every option with its variable and default', () => {
    const section = sectionOf(readme, 'options') ?? ''
    for (const o of OPTIONS) {
      const row = section.split('\n').find((l) => l.startsWith(`| \`${o.env}\` |`))
      expect([o.env, row?.includes(o.default === null ? '(unset)' : `\`${o.default}\``)]).toEqual([o.env, true])
    }
  })

  test('the worked example shows the values of the test vectors, re-derived by the signing code', () => {
    const section = sectionOf(readme, 'signing-example') ?? ''
    const v = vectors.requests[0]
    const keys = keyPairFromSeed(Buffer.from(v.private_seed_hex, 'hex'))
    expect(keys.publicKey).toBe(v.public_key)
    expect(bodyHash(v.body)).toBe(v.body_hash)
    expect(canonicalString(v.method, v.path, v.timestamp, v.body_hash)).toBe(v.canonical_string)
    expect(signRequest(keys, v.method, v.path, v.body, v.timestamp)['X-M2M-Signature']).toBe(v.signature)
    for (const value of [v.private_seed_hex, v.public_key, v.path, v.timestamp, v.body_hash, v.canonical_string, v.signature]) {
      expect(section).toContain(value)
    }
    const post = vectors.requests[1]
    for (const value of [post.body, post.body_hash, post.signature]) expect(section).toContain(value)
  })

  test('every operator command and the service unit are documented', () => {
    for (const cmd of ['relay serve', 'relay keygen', 'relay admin suspend', 'relay admin unsuspend', 'relay admin stats', 'relay admin agents', 'relay backup']) {
      expect(readme).toContain(cmd)
    }
    expect(existsSync(join(ROOT, 'deploy/relay.service'))).toBe(true)
    expect(readme).toContain('](deploy/relay.service)')
  })
})

describe('signing examples', () => {
  const v = vectors.requests[0]

  test('TypeScript prints the signature of the worked example', () => {
    const file = join(dir, 'sign.ts')
    writeFileSync(file, snippet(readme, 'sign-ts'))
    const r = run([process.execPath, file])
    expect(r.stderr.toString()).toBe('')
    expect(r.stdout.toString()).toContain(v.signature)
    expect(r.stdout.toString()).toContain(v.public_key)
  })

  test('Python prints the signature of the worked example', () => {
    if (!hasPythonCryptography()) return
    const file = join(dir, 'sign.py')
    writeFileSync(file, snippet(readme, 'sign-py'))
    const r = run(['python3', file])
    expect(r.stderr.toString()).toBe('')
    expect(r.stdout.toString()).toContain(v.signature)
    expect(r.stdout.toString()).toContain(v.public_key)
  })

  test('the shell script signs requests a running relay accepts, with and without a body', async () => {
    if (!Bun.which('openssl') || !Bun.which('curl')) return
    await buildBinary()
    const relay = await startBinary({ cwd: dir, dataDir: join(dir, 'data') })
    try {
      const script = join(dir, 'relay-curl.sh')
      writeFileSync(script, snippet(readme, 'sign-sh'))
      const key = run([join(ROOT, 'dist/relay'), 'keygen', '--out', join(dir, 'sh.key')]).stdout.toString().trim()
      const env = { RELAY_URL: relay.url, RELAY_KEY_FILE: join(dir, 'sh.key') }
      const patched = run(['sh', script, 'PATCH', `/v1/agents/${key}`, '{"display_name":"from sh"}'], env)
      expect(patched.stderr.toString()).toBe('')
      expect(JSON.parse(patched.stdout.toString()).display_name).toBe('from sh')
      const got = JSON.parse(run(['sh', script, 'GET', `/v1/agents/${key}`], env).stdout.toString())
      expect(got.public_key).toBe(key)
      expect(got.display_name).toBe('from sh')
      // the same GET twice within one second: each has its own millisecond timestamp, so no replay_detected
      const again = [run(['sh', script, 'GET', `/v1/agents/${key}`], env), run(['sh', script, 'GET', `/v1/agents/${key}`], env)]
      for (const r of again) expect(JSON.parse(r.stdout.toString()).public_key).toBe(key)
    } finally {
      relay.proc.kill('SIGTERM')
      await relay.proc.exited
    }
  }, 120_000) // builds the binary when this file runs alone
})

describe('webhook receivers', () => {
  const w = vectors.webhook

  async function receiver(cmd: string[]): Promise<{ proc: Subprocess; url: string }> {
    const port = await freePort()
    const proc = spawn(cmd, { cwd: dir, env: { PATH: process.env.PATH ?? '', PORT: String(port), WEBHOOK_SECRET: w.secret }, stdout: 'pipe', stderr: 'pipe' })
    const url = `http://127.0.0.1:${port}/`
    for (let i = 0; i < 200; i++) {
      if (await fetch(url, { method: 'POST', body: '{}' }).then(() => true, () => false)) return { proc, url }
      await Bun.sleep(25)
    }
    proc.kill()
    throw new Error(`receiver ${cmd.join(' ')} did not start`)
  }

  async function exercise(cmd: string[]) {
    const { proc, url } = await receiver(cmd)
    try {
      // the curl example signs with openssl and must be accepted
      if (Bun.which('openssl') && Bun.which('curl')) {
        const file = join(dir, 'delivery.sh')
        writeFileSync(file, snippet(readme, 'webhook-sh'))
        const r = run(['sh', file], { RECEIVER: url })
        expect(r.stdout.toString()).toMatch(/^HTTP\/1\.[01] 204/)
      }
      const post = (sig: string, ts: string, body = w.raw_body) =>
        fetch(url, { method: 'POST', body, headers: { 'content-type': 'application/json', 'x-m2m-webhook-signature': sig, 'x-m2m-webhook-timestamp': ts } })
      const now = new Date().toISOString()
      expect((await post(w.signature_header, now)).status).toBe(204)
      expect((await post(w.signature_header, now)).status).toBe(204) // a repeat is acknowledged, not processed twice
      expect((await post(w.signature_header, now, w.raw_body.replace('hello', 'hellO'))).status).toBe(401)
      expect((await post('00' + w.signature_header.slice(2), now)).status).toBe(401)
      expect((await post(w.signature_header, new Date(Date.now() - 10 * 60_000).toISOString())).status).toBe(401)
    } finally {
      proc.kill()
      await proc.exited
    }
    const printed = (await new Response(proc.stdout as ReadableStream).text()).trim().split('\n').filter(Boolean)
    // one line for the one message, however many times it was delivered
    expect(printed).toHaveLength(1)
    expect(printed[0]).toStartWith('11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo ')
    expect(JSON.parse(printed[0].split(' ').slice(1).join(' '))).toEqual({ text: 'hello' })
  }

  test('TypeScript verifies, checks the time and deduplicates', async () => {
    const file = join(dir, 'hook.ts')
    writeFileSync(file, snippet(readme, 'webhook-ts'))
    await exercise([process.execPath, file])
  })

  test('Python verifies, checks the time and deduplicates', async () => {
    if (!Bun.which('python3')) return
    const file = join(dir, 'hook.py')
    writeFileSync(file, snippet(readme, 'webhook-py'))
    await exercise(['python3', file])
  })
})
