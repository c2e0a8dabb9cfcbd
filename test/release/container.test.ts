/**
 * The container image: scripts/container-image.sh builds deploy/Containerfile around the linux-x64
 * release binary, and podman runs it — as the non-root relay user, data in the /var/lib/relay volume,
 * healthy by its HEALTHCHECK (`relay health`), stopping gracefully on SIGTERM and keeping its data
 * across a new container. Skipped with one line where podman is missing (never under CI=true).
 *
 * Before that, a probe independent of the relay's image: a FROM scratch image holding only /bin/true
 * and its libraries is built and run with a published port (else with the host's network). Where
 * podman is installed but this sandbox cannot build or run any container (no user namespaces, no
 * storage driver, no cgroups…), the file is skipped with one line naming podman's error, under
 * CI=true too: that is the machine, not the image. Where the probe runs, every test runs.
 *
 * Podman runs with `--runtime runc` where runc is installed (crun cannot start containers on a host
 * with hybrid cgroups, such as a nested container) and with explicit file and process limits (a
 * nested container may not raise them to podman's defaults); neither changes the image.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { spawnSync } from 'bun'
import { copyFileSync, mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { RelayClient, generateKeyPair } from '../../src/client/index.ts'
import { release, releaseName } from '../../scripts/release.ts'
import { freePort } from '../support/binary.ts'
import { tempDir } from '../support/harness.ts'
import { requireProgram } from '../support/requires.ts'

const ROOT = join(import.meta.dir, '..', '..')
const podmanPath = Bun.which('podman')
const installed = process.arch === 'x64' && requireProgram('podman', podmanPath, 'the container image test')
const runtime = Bun.which('runc') ? ['--runtime', 'runc'] : []
const limits = ['--ulimit', 'nofile=4096:4096', '--ulimit', 'nproc=4096:4096']
const id = `${process.pid}-${Date.now()}`
const tag = `localhost/relay-test:${id}`
const volume = `relay-test-data-${id}`
const containers: string[] = []
/** The port each container's relay answers on inside it (8080 unless it shares the host's network). */
const ports = new Map<string, number>()

function podman(args: string[], timeoutMs = 120_000): { code: number; out: string; err: string } {
  const r = spawnSync([podmanPath!, ...runtime, ...args], { stdout: 'pipe', stderr: 'pipe', timeout: timeoutMs })
  return { code: r.exitCode ?? -1, out: r.stdout.toString(), err: r.stderr.toString() }
}

/**
 * Whether this machine runs containers at all, and how they reach the network: 'bridge' (a published
 * port), 'host' (only the host's network), or podman's error in one line.
 */
function probe(): 'bridge' | 'host' | { error: string } {
  const ctx = tempDir('relay-container-probe-')
  const probeTag = `localhost/relay-test-probe:${id}`
  const firstLine = (r: ReturnType<typeof podman>) => {
    const lines = r.err.split('\n').filter((l) => l.trim())
    return (lines.find((l) => l.startsWith('Error:')) ?? lines.find((l) => /error/i.test(l)) ?? lines[0] ?? `exit ${r.code}`).trim()
  }
  try {
    mkdirSync(join(ctx, 'rootfs/bin'), { recursive: true })
    copyFileSync('/bin/true', join(ctx, 'rootfs/bin/true'))
    for (const lib of spawnSync(['ldd', '/bin/true']).stdout.toString().match(/\/\S+/g) ?? []) {
      mkdirSync(join(ctx, 'rootfs', dirname(lib)), { recursive: true })
      copyFileSync(lib, join(ctx, 'rootfs', lib))
    }
    writeFileSync(join(ctx, 'Containerfile'), 'FROM scratch\nCOPY rootfs/ /\n')
    const built = podman(['build', '-q', '-t', probeTag, '-f', join(ctx, 'Containerfile'), ctx])
    if (built.code !== 0) return { error: `podman build: ${firstLine(built)}` }
    const bridge = podman(['run', '--rm', ...limits, '-p', '127.0.0.1::8080', probeTag, '/bin/true'])
    if (bridge.code === 0) return 'bridge'
    const host = podman(['run', '--rm', ...limits, '--network', 'host', probeTag, '/bin/true'])
    return host.code === 0 ? 'host' : { error: `podman run: ${firstLine(bridge)}` }
  } finally {
    podman(['rmi', '-f', probeTag])
    rmSync(ctx, { recursive: true, force: true })
  }
}

const network = installed ? probe() : null
if (network && typeof network === 'object') console.log(`the container image test: skipped, podman cannot run a container on this machine (${network.error})`)
const hasPodman = network === 'bridge' || network === 'host'
const must = (r: ReturnType<typeof podman>, what: string) => {
  if (r.code !== 0) throw new Error(`${what} failed (${r.code}):\n${r.out}\n${r.err}`)
  return r
}

async function untilReady(url: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const ok = await fetch(`${url}/v1/health/ready`).then((r) => r.ok, () => false)
    if (ok) return
    if (Date.now() > deadline) throw new Error(`${url} was not ready within ${timeoutMs} ms`)
    await Bun.sleep(200)
  }
}

/** Starts a container of the image on a free loopback port, the data volume mounted. */
async function runRelay(name: string): Promise<string> {
  const port = await freePort()
  containers.push(name)
  // with the host's network the relay listens on the free port itself, on loopback only
  const net = network === 'bridge' ? ['-p', `127.0.0.1:${port}:8080`] : ['--network', 'host', '-e', `RELAY_PORT=${port}`, '-e', 'RELAY_HOST=127.0.0.1']
  must(podman(['run', '-d', '--name', name, ...limits, ...net, '-v', `${volume}:/var/lib/relay`, tag]), 'podman run')
  const url = `http://127.0.0.1:${port}`
  ports.set(name, port)
  await untilReady(url)
  return url
}

let dir: string
beforeAll(async () => {
  if (!hasPodman) return
  dir = tempDir('relay-container-')
  await release(dir, ['linux-x64'])
  const r = spawnSync(['bash', join(ROOT, 'scripts/container-image.sh'), join(dir, releaseName('linux-x64')), tag], { stdout: 'pipe', stderr: 'pipe', env: { ...process.env, CONTAINER_TOOL: 'podman' } })
  if (r.exitCode !== 0) throw new Error(`scripts/container-image.sh failed:\n${r.stdout}\n${r.stderr}`)
}, 300_000)

afterAll(() => {
  if (!hasPodman) return
  for (const name of containers) podman(['rm', '-f', '-t', '0', name])
  podman(['volume', 'rm', '-f', volume])
  podman(['rmi', '-f', tag])
  if (dir) rmSync(dir, { recursive: true, force: true })
})

describe.skipIf(!hasPodman)('the container image', () => {
  test('is the binary and its libraries only, run by a non-root user, with a volume and a health check', () => {
    const [image] = JSON.parse(must(podman(['image', 'inspect', tag]), 'inspect').out)
    const config = image.Config
    expect(config.User).toBe('10001:10001')
    expect(Object.keys(config.Volumes ?? {})).toEqual(['/var/lib/relay'])
    expect(config.Entrypoint).toEqual(['/usr/local/bin/relay'])
    expect(config.Cmd).toEqual(['serve'])
    expect(config.Env).toContain('RELAY_DATA_DIR=/var/lib/relay')
    expect((image.Healthcheck ?? config.Healthcheck)?.Test).toEqual(['CMD', '/usr/local/bin/relay', 'health'])
    // no shell to run anything else with
    const shell = podman(['run', '--rm', ...limits, '--entrypoint', '/bin/sh', tag, '-c', 'true'])
    expect(shell.code).not.toBe(0)
    const version = must(podman(['run', '--rm', ...limits, tag, '--version']), 'relay --version')
    expect(version.out.trim()).toMatch(/^relay \d+\.\d+\.\d+/)
    // well under the size of a distribution base image: the binary is most of it
    expect(image.Size).toBeLessThan(200 * 1024 * 1024)
  }, 60_000)

  test('serves signed requests, is healthy, stops on SIGTERM and keeps its data in the volume', async () => {
    const url = await runRelay(`relay-test-a-${id}`)
    const alice = new RelayClient({ baseUrl: url, keys: generateKeyPair() })
    await alice.updateProfile({ display_name: 'In a container' })

    const name = `relay-test-a-${id}`
    must(podman(['healthcheck', 'run', name]), 'podman healthcheck run')
    expect(must(podman(['inspect', name, '--format', '{{.State.Health.Status}}']), 'inspect').out.trim()).toBe('healthy')
    const inside = network === 'bridge' ? 8080 : ports.get(name)
    expect(must(podman(['exec', name, '/usr/local/bin/relay', 'health']), 'relay health').out).toContain(`ok http://127.0.0.1:${inside}/v1/health/ready`)
    // the process is not root, and the data directory is the volume
    expect(must(podman(['top', name, 'user']), 'podman top').out).not.toMatch(/^root$/m)
    const logs = () => podman(['logs', name]).out
    expect(JSON.parse(logs().split('\n')[0])).toMatchObject({ msg: 'relay started', data_dir: '/var/lib/relay' })

    // operator commands run inside, on the volume, as the README shows
    const stats = JSON.parse(must(podman(['exec', name, 'relay', 'admin', 'stats', '--json']), 'relay admin stats').out)
    expect(stats).toMatchObject({ data_dir: '/var/lib/relay', agents: { active: 1 } })

    must(podman(['stop', '-t', '20', name]), 'podman stop')
    expect(must(podman(['inspect', name, '--format', '{{.State.ExitCode}}']), 'inspect').out.trim()).toBe('0')
    expect(logs()).toContain('"msg":"relay stopped"')

    // a new container on the same volume has the agent
    const again = await runRelay(`relay-test-b-${id}`)
    const reader = new RelayClient({ baseUrl: again, keys: generateKeyPair() })
    expect((await reader.getAgent(alice.publicKey)).display_name).toBe('In a container')
  }, 120_000)
})
