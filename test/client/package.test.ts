/**
 * The installable client `m2m-relay`: built (npm run build:client), packed (npm pack), installed from
 * the tarball into a fresh project without the registry, then run with plain `node` against the
 * compiled relay, and type-checked there with skipLibCheck: false — once with Node's types, once with
 * the DOM library alone. The README's quick start runs as written in a new Node project and a new Bun
 * project (these two need the npm registry for `ws`; without it they are skipped with one line, never
 * under CI=true).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { spawnSync } from 'bun'
import { copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { freePort } from '../support/binary.ts'
import { tempDir } from '../support/harness.ts'
import { relayBinary, startBinary, tempDataDir, type RunningRelay } from '../e2e/binary.ts'
import { snippet } from '../support/readme.ts'

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
  tarball = readdirSync(packs).find((f) => f.startsWith('m2m-relay-'))!
  relay = await startBinary(tempDataDir())
}, 120_000)

afterAll(async () => {
  await relay?.stop()
  if (dir) rmSync(dir, { recursive: true, force: true })
})

describe.skipIf(!usable)('the packed client', () => {
  test('holds the bundle, declarations, README and LICENSE; depends on ws alone; its README links resolve inside it', () => {
    const list = must(run(['tar', '-tzf', join(dir, 'packs', tarball)], dir), 'tar').stdout.trim().split('\n').sort()
    expect(list).toContain('package/dist/index.js')
    expect(list).toContain('package/dist/types/client/index.d.ts')
    expect(list).toContain('package/package.json')
    expect(list).toContain('package/LICENSE')
    expect(list.filter((f) => !/^package\/(dist\/index\.js|dist\/types\/(client|crypto|auth|lib)\/[a-z0-9-]+\.d\.ts|package\.json|README\.md|LICENSE)$/.test(f))).toEqual([])
    const unpacked = join(dir, 'unpacked')
    mkdirSync(unpacked)
    must(run(['tar', '-xzf', join(dir, 'packs', tarball), '-C', unpacked], dir), 'tar -x')
    const manifest = JSON.parse(readFileSync(join(unpacked, 'package/package.json'), 'utf8'))
    expect(manifest.name).toBe('m2m-relay')
    expect(Object.keys(manifest.dependencies)).toEqual(['ws'])
    expect(manifest.peerDependencies).toBeUndefined()
    expect(readFileSync(join(unpacked, 'package/LICENSE'), 'utf8')).toBe(readFileSync(join(ROOT, 'LICENSE'), 'utf8'))
    // a link in the README that npmjs.com shows must be absolute or name a file of the package
    const readme = readFileSync(join(unpacked, 'package/README.md'), 'utf8')
    const links = [...readme.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1])
    expect(links.length).toBeGreaterThan(0)
    for (const link of links.filter((l) => !/^https?:\/\//.test(l))) expect(existsSync(join(unpacked, 'package', link.split('#')[0]))).toBe(true)
    expect(readme).toContain("from 'm2m-relay'")
    // what users read: no references to the project's internal contract document
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
    // 200,000 bytes in 4 segments: 17 + 200,000 + 4 × 16 stored
    expect(steps.encrypted).toEqual({ step: 'encrypted', version: 3, text: 'encrypted file', stored: 200_081, size: 200_000, same: true })
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
      if (!existsSync(join(app, 'node_modules/m2m-relay'))) throw new Error('the install test did not run')
      copyFileSync(join(FIXTURES, 'consumer.ts.fixture'), join(app, 'consumer.ts'))
      const config = {
        compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, skipLibCheck: false, noEmit: true, ...compilerOptions },
        files: ['consumer.ts'],
      }
      writeFileSync(join(app, 'tsconfig.json'), JSON.stringify(config, null, 2))
      const r = run([process.execPath, join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], app)
      expect(r.stdout + r.stderr).toBe('')
      expect(r.code).toBe(0)
    }, 60_000)
  }

  test('a type error in the consumer is reported (the check above can fail)', () => {
    const app = join(dir, 'app')
    writeFileSync(join(app, 'wrong.ts'), "import { RelayClient } from 'm2m-relay'\nexport const n: number = new RelayClient({ baseUrl: 'x', keys: { seed: new Uint8Array(32), publicKey: 'k' } }).publicKey\n")
    writeFileSync(join(app, 'tsconfig.wrong.json'), JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true, lib: ['ES2022', 'DOM'], types: [] }, files: ['wrong.ts'] }))
    const r = run([process.execPath, join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.wrong.json'], app)
    expect(r.code).not.toBe(0)
    expect(r.stdout).toContain("Type 'string' is not assignable to type 'number'")
  }, 60_000)

  test('examples/echo-agent.ts, saved as .mjs, runs unchanged with plain node and echoes', async () => {
    const app = join(dir, 'app')
    copyFileSync(join(ROOT, 'examples/echo-agent.ts'), join(app, 'echo-agent.mjs'))
    const { RelayClient, encodeKeyFile, generateKeyPair } = await import('../../src/client/index.ts')
    const echoKeys = generateKeyPair()
    writeFileSync(join(app, 'echo.key'), encodeKeyFile(echoKeys), { mode: 0o600 })
    const proc = Bun.spawn([node!, 'echo-agent.mjs'], { cwd: app, env: { PATH: process.env.PATH ?? '', RELAY_URL: relay.url, RELAY_KEY_FILE: 'echo.key' }, stdout: 'pipe', stderr: 'pipe' })
    try {
      const alice = new RelayClient({ baseUrl: relay.url, keys: generateKeyPair() })
      // the agent's first request creates it; send once it exists
      for (let i = 0; !(await alice.discover({ tag: 'echo' })).agents.some((a) => a.public_key === echoKeys.publicKey); i++) {
        if (i > 200) throw new Error('the echo agent did not publish its profile')
        await Bun.sleep(50)
      }
      const sent = await alice.send({ recipient_key: echoKeys.publicKey, body: { text: 'from node' } })
      let reply
      for (let i = 0; !(reply = (await alice.poll()).messages.find((m) => m.in_reply_to === sent.message_id)); i++) {
        if (i > 200) throw new Error('no echo')
        await Bun.sleep(50)
      }
      expect(reply.body).toEqual({ text: 'from node' })
    } finally {
      proc.kill('SIGTERM')
      expect(await proc.exited).toBe(0)
    }
    expect(await new Response(proc.stderr).text()).toBe('')
    expect(await new Response(proc.stdout).text()).toEndWith('stopped\n')
  }, 30_000)

  test('without any WebSocket (no global one, no ws), listen() and connect() fail at once and say what to install', async () => {
    const bare = join(dir, 'bare')
    mkdirSync(join(bare, 'node_modules'), { recursive: true })
    must(run(['cp', '-r', join(dir, 'app/node_modules/m2m-relay'), join(bare, 'node_modules/m2m-relay')], dir), 'cp')
    writeFileSync(join(bare, 'package.json'), JSON.stringify({ name: 'bare', private: true, type: 'module' }))
    writeFileSync(join(bare, 'listen.mjs'), `
delete globalThis.WebSocket
const { RelayClient, generateKeyPair, NoWebSocketError } = await import('m2m-relay')
const client = new RelayClient({ baseUrl: process.env.RELAY_URL, keys: generateKeyPair() })
const timer = setTimeout(() => { console.log(JSON.stringify({ silent: true })); process.exit(3) }, 5000)
const results = []
for (const attempt of [() => client.listen({ onMessage() {} }), () => client.connect()]) {
  try { await attempt(); results.push('resolved') } catch (e) { results.push({ name: e.name, typed: e instanceof NoWebSocketError, message: e.message }) }
}
clearTimeout(timer)
console.log(JSON.stringify(results))
`)
    const r = run([node!, 'listen.mjs'], bare, { RELAY_URL: relay.url })
    expect(r.stderr).toBe('')
    const results = JSON.parse(r.stdout)
    for (const res of results) {
      expect(res).toMatchObject({ name: 'NoWebSocketError', typed: true })
      expect(res.message).toContain('npm install ws')
    }
  })
})

/** The npm registry answers: the README's install commands fetch `ws` from it. */
async function registryReachable(): Promise<boolean> {
  try {
    return (await fetch('https://registry.npmjs.org/ws', { method: 'HEAD', signal: AbortSignal.timeout(5000) })).ok
  } catch {
    return false
  }
}
const registry = usable ? await registryReachable() : false
if (usable && !registry) {
  if (process.env.CI === 'true') throw new Error('the npm registry is needed by the quick-start test of test/client/package.test.ts')
  console.log('skipped the README quick start in test/client/package.test.ts: the npm registry (registry.npmjs.org) cannot be reached')
}

describe.skipIf(!usable || !registry)("the README's quick start, as written", () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8')
  const project = snippet(readme, 'quickstart-project').split('\n')
  let sandbox: string

  /** A checkout as the quick start leaves it: dist/relay, the two key files and the packed client. */
  function checkout(name: string): string {
    const where = join(sandbox, name, 'checkout')
    mkdirSync(join(where, 'dist'), { recursive: true })
    return where
  }

  beforeAll(async () => {
    sandbox = join(dir, 'quickstart')
    const first = checkout('node')
    must(run(['ln', '-s', await relayBinary(), join(first, 'dist/relay')], first), 'ln')
    const sh = run(['sh', '-ec', snippet(readme, 'quickstart-sh')], first, { RELAY_URL: relay.url })
    must(sh, 'the shell part of the quick start')
    // the message went to the second agent just made, and that agent read it
    expect(sh.stdout).toContain('hello Bob')
    const second = checkout('bun')
    for (const where of [first, second]) copyFileSync(join(dir, 'packs', tarball), join(where, tarball))
    for (const key of ['relay.key', 'bob.key']) copyFileSync(join(first, key), join(second, key))
  }, 60_000)

  test('the project steps name the commands that build and pack the client', () => {
    expect(project[0]).toStartWith('npm run build:client && npm pack ./packages/client')
    expect(project[0]).toContain(tarball)
  })

  for (const runtime of ['node', 'bun'] as const) {
    test(`agent.js runs in a new ${runtime === 'node' ? 'Node' : 'Bun'} project: sends to Bob, Bob polls, then listens`, async () => {
      const where = join(sandbox, runtime, 'checkout')
      // the build and pack line ran above; the rest runs as written (Bun: the commented alternative)
      const steps = runtime === 'node'
        ? project.slice(1).filter((l) => !l.startsWith('#'))
        : [project[1], project.find((l) => l.startsWith('# or, with Bun'))!.replace(/^#[^:]*:\s*/, '')]
      // `bun` on PATH: the test runner itself (its file may be named bun.exe)
      const bunDir = join(dir, 'bin')
      if (!existsSync(join(bunDir, 'bun'))) must(run(['sh', '-c', `mkdir -p "${bunDir}" && ln -s "${process.execPath}" "${bunDir}/bun"`], dir), 'ln bun')
      must(run(['sh', '-ec', steps.join('\n')], where, { PATH: `${bunDir}:${process.env.PATH ?? ''}`, npm_config_cache: join(dir, 'npm-cache-online') }), `${runtime} project setup`)
      const app = join(sandbox, runtime, 'my-agent')
      writeFileSync(join(app, 'agent.js'), snippet(readme, 'quickstart-client'))
      const proc = Bun.spawn([runtime === 'node' ? node! : process.execPath, 'agent.js'], { cwd: app, env: { PATH: process.env.PATH ?? '', RELAY_URL: relay.url }, stdout: 'pipe', stderr: 'pipe' })
      const timer = setTimeout(() => proc.kill(), 30_000)
      const [code, out, err] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()])
      clearTimeout(timer)
      expect([code, err]).toEqual([0, ''])
      const lines = out.trim().split('\n')
      expect(lines[0]).toMatch(/^sent msg_/)
      expect(lines[1]).toMatch(/^polled [A-Za-z0-9_-]{43} \{"text":"hello again"\}$/)
      expect(lines[2]).toBe('pushed {"text":"over the WebSocket"}')
      expect(lines).toHaveLength(3)
    }, 120_000)
  }
})
