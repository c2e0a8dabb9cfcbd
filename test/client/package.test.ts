/**
 * The installable client: built (npm run build:client), packed (npm pack), installed from the tarball
 * into a fresh project without the registry, then run with plain `node` against the compiled relay, and
 * type-checked there with skipLibCheck: false — once with Node's types, once with the DOM library alone.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { spawnSync } from 'bun'
import { copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { freePort } from '../support/binary.ts'
import { tempDir } from '../support/harness.ts'
import { startBinary, tempDataDir, type RunningRelay } from '../e2e/binary.ts'

const ROOT = join(import.meta.dir, '..', '..')
const FIXTURES = join(import.meta.dir, 'fixtures')
const node = Bun.which('node')
const nodeMajor = node ? Number(spawnSync([node, '--version']).stdout.toString().trim().replace(/^v/, '').split('.')[0]) : 0
const usable = node !== null && nodeMajor >= 20
if (!usable) {
  if (process.env.CI === 'true') throw new Error('Node ≥ 20 is needed by test/client/package.test.ts')
  console.log(`skipped test/client/package.test.ts: no node ≥ 20 on PATH (${node ?? 'none'}, major ${nodeMajor})`)
}

let dir: string
let relay: RunningRelay
let tarball: string
const run = (cmd: string[], cwd: string, env: Record<string, string> = {}) => {
  const r = spawnSync(cmd, { cwd, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? dir, ...env }, stdout: 'pipe', stderr: 'pipe' })
  return { code: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() }
}
const must = (r: ReturnType<typeof run>, what: string) => {
  if (r.code !== 0) throw new Error(`${what} failed (${r.code}):\n${r.stdout}\n${r.stderr}`)
  return r
}

beforeAll(async () => {
  if (!usable) return
  dir = tempDir('relay-client-pkg-')
  must(run([process.execPath, join(ROOT, 'packages/client/build.ts')], ROOT), 'building the client')
  const packs = join(dir, 'packs')
  mkdirSync(packs)
  must(run(['npm', 'pack', '--silent', '--pack-destination', packs], join(ROOT, 'packages/client')), 'npm pack')
  // ws for Node 20, packed from this repository's own install so that no registry is needed
  must(run(['npm', 'pack', '--silent', '--pack-destination', packs, join(ROOT, 'node_modules/ws')], dir), 'npm pack ws')
  tarball = readdirSync(packs).find((f) => f.startsWith('agent-relay-client-'))!
  relay = await startBinary(tempDataDir())
}, 120_000)

afterAll(async () => {
  await relay?.stop()
  if (dir) rmSync(dir, { recursive: true, force: true })
})

describe.skipIf(!usable)('the packed client', () => {
  test('holds the bundle and declarations only, with no dependency to fetch', () => {
    const list = must(run(['tar', '-tzf', join(dir, 'packs', tarball)], dir), 'tar').stdout.trim().split('\n').sort()
    expect(list).toContain('package/dist/index.js')
    expect(list).toContain('package/dist/types/client/index.d.ts')
    expect(list).toContain('package/package.json')
    expect(list.filter((f) => !/^package\/(dist\/index\.js|dist\/types\/(client|crypto|auth|lib)\/[a-z0-9-]+\.d\.ts|package\.json|README\.md)$/.test(f))).toEqual([])
    // what users read: no references to the project's internal contract document
    const unpacked = join(dir, 'unpacked')
    mkdirSync(unpacked)
    must(run(['tar', '-xzf', join(dir, 'packs', tarball), '-C', unpacked], dir), 'tar -x')
    const text = list.filter((f) => f.endsWith('.ts') || f.endsWith('.js') || f.endsWith('.md')).map((f) => readFileSync(join(unpacked, f), 'utf8')).join('\n')
    expect(text).not.toContain('SPEC')
  })

  test('installs from the tarball offline and runs with plain node: signs, sends, polls, listens, transfers', async () => {
    const app = join(dir, 'app')
    mkdirSync(app)
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }))
    const packs = readdirSync(join(dir, 'packs')).map((f) => join(dir, 'packs', f))
    must(run(['npm', 'install', '--offline', '--no-audit', '--no-fund', ...packs], app, { npm_config_cache: join(dir, 'npm-cache') }), 'npm install')
    copyFileSync(join(FIXTURES, 'consumer.mjs'), join(app, 'consumer.mjs'))
    const notARelay = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response('<html>a web site</html>', { headers: { 'content-type': 'text/html' } }) })
    const proc = Bun.spawn([node!, 'consumer.mjs'], {
      cwd: app,
      env: { PATH: process.env.PATH ?? '', RELAY_URL: relay.url, DOWN_URL: `http://127.0.0.1:${await freePort()}`, NOT_A_RELAY_URL: `http://127.0.0.1:${notARelay.port}` },
      stdout: 'pipe',
      stderr: 'pipe',
    })
    const [code, out, err] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()])
    notARelay.stop(true)
    console.log(out.trim())
    expect([code, err]).toEqual([0, ''])
    const steps = Object.fromEntries(out.trim().split('\n').map((l) => JSON.parse(l)).map((s) => [s.step, s]))
    expect(steps.runtime.node).toStartWith(`v${nodeMajor}.`)
    if (nodeMajor < 22) expect(steps.runtime.globalWebSocket).toBe('undefined') // so listen() went through ws
    expect(steps.profile).toMatchObject({ display_name: 'Alice from Node', public_key: true })
    expect(steps.poll.got).toEqual([[steps.poll.sent, 'delivered', 'polled']])
    expect(steps.listen).toMatchObject({ got: steps.listen.sent, text: 'listened', attachment: true })
    expect(steps.acked.status).toBe('delivered')
    expect(steps.download).toMatchObject({ size: 16_000, sha256: true, same: true })
    expect(steps.refused).toEqual({ step: 'refused', type: true, code: 'message_not_found', request: true })
    expect(steps.down.type).toBe(true)
    expect(steps.down.message).toContain('cannot reach the relay at http://127.0.0.1:')
    expect(steps['not-a-relay'].type).toBe(true)
    expect(steps['not-a-relay'].message).toContain('this is not a relay')
  }, 60_000)

  for (const [name, compilerOptions] of [
    ['Node types', { lib: ['ES2022'], types: ['node'], typeRoots: [join(ROOT, 'node_modules/@types')] }],
    ['the DOM library alone', { lib: ['ES2022', 'DOM'], types: [] }],
  ] as const) {
    test(`type-checks in a consumer with skipLibCheck false (${name})`, () => {
      const app = join(dir, 'app')
      if (!existsSync(join(app, 'node_modules/@agent-relay/client'))) throw new Error('the install test did not run')
      copyFileSync(join(FIXTURES, 'consumer.ts.fixture'), join(app, 'consumer.ts'))
      const config = {
        compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, skipLibCheck: false, noEmit: true, ...compilerOptions },
        files: ['consumer.ts'],
      }
      writeFileSync(join(app, 'tsconfig.json'), JSON.stringify(config, null, 2))
      const r = run([process.execPath, join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], app)
      expect(r.stdout + r.stderr).toBe('')
      expect(r.code).toBe(0)
    }, 30_000)
  }

  test('a type error in the consumer is reported (the check above can fail)', () => {
    const app = join(dir, 'app')
    writeFileSync(join(app, 'wrong.ts'), "import { RelayClient } from '@agent-relay/client'\nexport const n: number = new RelayClient({ baseUrl: 'x', keys: { seed: new Uint8Array(32), publicKey: 'k' } }).publicKey\n")
    writeFileSync(join(app, 'tsconfig.wrong.json'), JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true, lib: ['ES2022', 'DOM'], types: [] }, files: ['wrong.ts'] }))
    const r = run([process.execPath, join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.wrong.json'], app)
    expect(r.code).not.toBe(0)
    expect(r.stdout).toContain("Type 'string' is not assignable to type 'number'")
  }, 30_000)
})
