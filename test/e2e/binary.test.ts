/** End to end: build dist/relay, start it from a temp dir, drive it over HTTP, stop it with SIGTERM. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { rmSync } from 'node:fs'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { RelayClient } from '../../src/client/index.ts'
import { tempDir } from '../support/harness.ts'
import { buildBinary, startBinary, type RunningBinary } from '../support/binary.ts'
import { spawnSync } from 'bun'

let dir: string
let bin: string
beforeAll(async () => {
  bin = await buildBinary()
  dir = tempDir('relay-e2e-')
})
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe('the compiled binary', () => {
  let relay: RunningBinary
  test('starts from any directory, creates its data dir, serves signed requests', async () => {
    relay = await startBinary({ cwd: dir, dataDir: `${dir}/data/nested` })
    const keys = generateKeyPair()
    const client = new RelayClient({ baseUrl: relay.url, keys })
    const me = await client.updateProfile({ display_name: 'E2E', visibility: 'public' })
    expect(me.display_name).toBe('E2E')
    expect((await client.getAgent()).visibility).toBe('public')
    const details = await client.health('/details')
    expect(details.status).toBe('ok')
    expect(details.version).toMatch(/^\d+\.\d+\.\d+/)
    const docs = await fetch(`${relay.url}/docs`)
    expect(docs.status).toBe(200)
    expect(await docs.text()).toContain('/docs/scalar.js')
    expect((await fetch(`${relay.url}/docs/scalar.js`)).status).toBe(200)
    const spec = (await (await fetch(`${relay.url}/v1/openapi.json`)).json()) as any
    expect(spec.openapi).toMatch(/^3\./)
    expect(Object.keys(spec.paths)).toContain('/v1/agents/{publicKey}')
  })

  test('logs JSON lines with a start-up line and request lines', async () => {
    const lines = relay
      .stdout()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
    const started = lines.find((l) => l.msg === 'relay started')
    expect(started.data_dir).toBe(`${dir}/data/nested`)
    expect(started.version).toBeString()
    const req = lines.find((l) => l.msg === 'request' && l.route === '/v1/agents/:publicKey')
    expect(req.request_id).toMatch(/^req_/)
    expect(req.status).toBe(200)
    expect(JSON.stringify(lines)).not.toContain('X-M2M-Signature')
  })

  test('relay admin suspend reaches the running relay within 1 s', async () => {
    const keys = generateKeyPair()
    const client = new RelayClient({ baseUrl: relay.url, keys })
    await client.getAgent()
    const s = spawnSync([bin, 'admin', 'suspend', keys.publicKey, '--reason', 'abuse', '--data-dir', `${dir}/data/nested`], { cwd: dir })
    expect(s.exitCode).toBe(0)
    const started = Date.now()
    let code = ''
    while (Date.now() - started < 1000) {
      code = await client.getAgent().then(
        () => 'ok',
        (e) => e.code,
      )
      if (code === 'agent_suspended') break
      await Bun.sleep(50)
    }
    expect(code).toBe('agent_suspended')
    expect(spawnSync([bin, 'admin', 'unsuspend', keys.publicKey, '--data-dir', `${dir}/data/nested`], { cwd: dir }).exitCode).toBe(0)
    // reinstatement reaches the running relay on the same schedule as suspension
    const reinstated = Date.now()
    let status = ''
    while (Date.now() - reinstated < 1000) {
      status = await client.getAgent().then(
        (a) => a.status,
        (e) => e.code,
      )
      if (status === 'active') break
      await Bun.sleep(50)
    }
    expect(status).toBe('active')
  })

  test('stops gracefully on SIGTERM with exit 0', async () => {
    relay.proc.kill('SIGTERM')
    expect(await relay.proc.exited).toBe(0)
    expect(relay.stdout()).toContain('"relay stopped"')
  })

  test('a bad configuration value stops start-up with one line naming it', () => {
    const r = spawnSync([bin, 'serve', '--data-dir', `${dir}/d2`], { cwd: dir, env: { RELAY_BLOB_QUOTA: 'lots' } })
    expect(r.exitCode).not.toBe(0)
    const err = r.stderr.toString().trim()
    expect(err.split('\n')).toHaveLength(1)
    expect(err).toContain('RELAY_BLOB_QUOTA')
  })

  test('--version, --help, keygen and admin suspend', async () => {
    expect(spawnSync([bin, '--version']).stdout.toString()).toMatch(/^relay \d+\.\d+\.\d+/)
    expect(spawnSync([bin, '--help']).stdout.toString()).toContain('relay keygen')
    const k = spawnSync([bin, 'keygen', '--out', `${dir}/a.key`], { cwd: dir })
    expect(k.exitCode).toBe(0)
    const pub = k.stdout.toString().trim()
    expect(pub).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect((await Bun.file(`${dir}/a.key`).stat()).mode & 0o777).toBe(0o600)
    expect(spawnSync([bin, 'keygen', '--out', `${dir}/a.key`], { cwd: dir }).exitCode).not.toBe(0) // never overwrites
    const s = spawnSync([bin, 'admin', 'suspend', pub, '--reason', 'test', '--data-dir', `${dir}/data/nested`], { cwd: dir })
    expect(s.exitCode).toBe(0)
  })
})
