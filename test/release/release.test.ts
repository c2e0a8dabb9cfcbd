/**
 * `npm run release`: binaries for linux-x64, linux-arm64 and linux-x64-baseline with a SHA256SUMS file
 * that `sha256sum -c` accepts. The x64 builds run here; the arm64 one runs under qemu-user (version,
 * a relay serving, the arm64 client signing a request to it, and a request signed by the test).
 * Skipped with one line where qemu or the arm64 C library is missing (never under CI=true).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { spawn, spawnSync } from 'bun'
import { existsSync, readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { generateKeyPair, signRequest } from '../../src/auth/sign.ts'
import { VERSION } from '../../src/version.ts'
import { TARGETS, release, releaseName } from '../../scripts/release.ts'
import { freePort } from '../support/binary.ts'
import { tempDir } from '../support/harness.ts'
import { requireProgram } from '../support/requires.ts'

/** Debian's libc6-arm64-cross puts the arm64 loader and C library here; qemu-user runs with -L on it. */
const ARM64_SYSROOT = '/usr/aarch64-linux-gnu'
const qemu = Bun.which('qemu-aarch64') ?? Bun.which('qemu-aarch64-static')
const hasQemu =
  requireProgram('qemu-user', qemu, 'the arm64 release test') &&
  requireProgram('libc6-arm64-cross', existsSync(join(ARM64_SYSROOT, 'lib/ld-linux-aarch64.so.1')) ? ARM64_SYSROOT : null, 'the arm64 release test')

let dir: string
let built: Awaited<ReturnType<typeof release>>
beforeAll(async () => {
  dir = tempDir('relay-release-')
  built = await release(dir, Object.keys(TARGETS))
}, 300_000)
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const arm64 = (args: string[]) => [qemu as string, '-L', ARM64_SYSROOT, join(dir, releaseName('linux-arm64')), ...args]

describe('npm run release', () => {
  test('builds the three targets and a SHA256SUMS file that sha256sum -c accepts', () => {
    expect(built.map((b) => b.file)).toEqual(['linux-x64', 'linux-arm64', 'linux-x64-baseline'].map(releaseName))
    const sums = readFileSync(join(dir, 'SHA256SUMS'), 'utf8')
    expect(sums.trim().split('\n')).toEqual(built.map((b) => `${b.sha256}  ${b.file}`))
    const check = spawnSync(['sha256sum', '-c', 'SHA256SUMS'], { cwd: dir })
    expect(check.stdout.toString()).toBe(built.map((b) => `${b.file}: OK\n`).join(''))
    expect(check.exitCode).toBe(0)
    for (const b of built) expect(b.sizeBytes).toBeGreaterThan(20 * 1024 * 1024)
  })

  test('each binary is an ELF executable for its machine; the x64 ones run here', () => {
    const machine = (file: string) => readFileSync(join(dir, file)).readUInt16LE(18) // ELF e_machine
    expect(machine(releaseName('linux-x64'))).toBe(62) // EM_X86_64
    expect(machine(releaseName('linux-x64-baseline'))).toBe(62)
    expect(machine(releaseName('linux-arm64'))).toBe(183) // EM_AARCH64
    for (const target of ['linux-x64', 'linux-x64-baseline']) {
      const r = spawnSync([join(dir, releaseName(target)), '--version'])
      expect(r.stdout.toString()).toBe(`relay ${VERSION}\n`)
    }
  })

  test.skipIf(!hasQemu)('the arm64 binary runs under qemu-user: --version, serve, and signed requests', async () => {
    const version = spawnSync(arm64(['--version']))
    expect(version.stdout.toString()).toBe(`relay ${VERSION}\n`)

    const keygen = spawnSync(arm64(['keygen', '--out', join(dir, 'agent.key')]), { cwd: dir })
    expect(keygen.exitCode).toBe(0)
    const publicKey = keygen.stdout.toString().trim()

    const port = await freePort()
    const server = spawn(arm64(['serve', '--port', String(port), '--data-dir', join(dir, 'data')]), { cwd: dir, stdout: 'ignore', stderr: 'pipe' })
    const url = `http://127.0.0.1:${port}`
    try {
      const deadline = Date.now() + 90_000 // emulated: start-up is slow on a loaded machine
      for (;;) {
        if (server.exitCode !== null) throw new Error(`arm64 relay exited: ${await new Response(server.stderr).text()}`)
        const ok = await fetch(`${url}/v1/health/ready`).then((r) => r.ok, () => false)
        if (ok) break
        if (Date.now() > deadline) throw new Error('arm64 relay did not become ready')
        await Bun.sleep(250)
      }
      // the arm64 client signs a request to the arm64 relay
      const whoami = spawn(arm64(['whoami', '--json', '--relay', url, '--key', join(dir, 'agent.key')]), { cwd: dir, stdout: 'pipe', stderr: 'pipe' })
      const [code, out, err] = await Promise.all([whoami.exited, new Response(whoami.stdout).text(), new Response(whoami.stderr).text()])
      expect([code, err]).toEqual([0, ''])
      expect(JSON.parse(out).agent.public_key).toBe(publicKey)
      // a request signed here verifies on the arm64 relay
      const keys = generateKeyPair()
      const path = `/v1/agents/${publicKey}`
      const res = await fetch(url + path, { headers: { ...signRequest(keys, 'GET', path, '') } })
      expect(res.status).toBe(200)
      expect(((await res.json()) as { public_key: string }).public_key).toBe(publicKey)
    } finally {
      server.kill('SIGTERM')
      await server.exited
    }
  }, 180_000)
})
