/** The agent commands through the built binary against a running binary relay. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { spawnSync } from 'bun'
import { existsSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { CLIENT_COMMANDS } from '../../src/cli/commands/index.ts'
import { tempDir } from '../support/harness.ts'
import { BINARY, buildBinary, freePort, startBinary, type RunningBinary } from '../support/binary.ts'
import { captureIo, runCli, startCliRelay, type CliRelay } from '../support/cli.ts'
import { runClientCommand } from '../../src/cli/client-cli.ts'

let dir: string
let relay: RunningBinary
let me: string
let cli: (args: string[], env?: Record<string, string>) => ReturnType<typeof runCli>
let fixture: CliRelay
beforeAll(async () => {
  fixture = await startCliRelay('relay-cli-')
  ;({ dir, relay, me, cli } = fixture)
}, 120_000)
afterAll(() => fixture.close())

describe('whoami and profile', () => {
  test('whoami prints the key, then the profile; --json prints one document', async () => {
    const r = await cli(['whoami'])
    expect(r.code).toBe(0)
    expect(r.stderr).toBe('')
    const lines = r.stdout.split('\n')
    expect(lines[0]).toBe(me)
    expect(r.stdout).toContain(`relay         ${relay.url}`)
    expect(r.stdout).toContain('status        active')
    const j = await cli(['whoami', '--json'])
    const doc = JSON.parse(j.stdout)
    expect(doc.public_key).toBe(me)
    expect(doc.relay).toBe(relay.url)
    expect(doc.key_file).toBe(join(dir, 'agent.key'))
    expect(doc.agent.public_key).toBe(me)
  })

  test('RELAY_URL and RELAY_KEY_FILE stand in for the flags', async () => {
    const r = await runCli(['whoami', '--json'], { cwd: dir, env: { RELAY_URL: relay.url, RELAY_KEY_FILE: join(dir, 'agent.key') } })
    expect(r.code).toBe(0)
    expect(JSON.parse(r.stdout).public_key).toBe(me)
  })

  test('profile set changes only the fields given; capabilities from a file; profile get reads it back', async () => {
    writeFileSync(
      join(dir, 'caps.json'),
      JSON.stringify([{ name: 'translate', description: 'Translates text', tags: ['NLP', 'text'], version: '1.0' }]),
    )
    const set = await cli(['profile', 'set', '--name', 'Cli Agent', '--visibility', 'public', '--inbox-policy', 'allowlist', '--metadata', '{"team":"ops"}', '--capabilities', '@caps.json'])
    expect(set.stderr).toBe('')
    expect(set.code).toBe(0)
    expect(set.stdout).toContain('display name  Cli Agent')
    expect(set.stdout).toContain('inbox policy  allowlist')
    expect(set.stdout).toContain('  - translate (1.0) [nlp, text]: Translates text')
    const got = JSON.parse((await cli(['profile', 'get', '--json'])).stdout)
    expect(got.display_name).toBe('Cli Agent')
    expect(got.visibility).toBe('public')
    expect(got.metadata).toEqual({ team: 'ops' })
    expect(got.capabilities[0].tags).toEqual(['nlp', 'text'])
    // a second change leaves the rest alone; "" clears the name; capabilities piped from stdin
    await runCli(['profile', 'set', '--name', '', '--capabilities', '@-', '--relay', relay.url, '--key', 'agent.key'], { cwd: dir, stdin: JSON.stringify({ capabilities: [] }) })
    const after = JSON.parse((await cli(['profile', 'get', '--json'])).stdout)
    expect(after.display_name).toBeNull()
    expect(after.capabilities).toEqual([])
    expect(after.inbox_policy).toBe('allowlist')
  })

  test("profile get KEY shows another agent's profile", async () => {
    const other = generateKeyPair().publicKey
    // an agent exists once it has made a signed request; ours reads itself first
    const r = await cli(['profile', 'get', me])
    expect(r.code).toBe(0)
    expect(r.stdout.split('\n')[0]).toBe(`public key    ${me}`)
    const missing = await cli(['profile', 'get', other])
    expect(missing.code).toBe(1)
  })
})

describe('errors', () => {
  test("the relay's code and request id, on stderr, with a non-zero exit", async () => {
    const other = generateKeyPair().publicKey
    const r = await cli(['profile', 'get', other])
    expect(r.code).toBe(1)
    expect(r.stdout).toBe('')
    const m = /^relay: error: (.+) \(code agent_not_found, request (req_[A-Za-z0-9_-]+)\)\n$/.exec(r.stderr)
    expect(m).not.toBeNull()
    // the same id is in the relay's log line for that request
    await Bun.sleep(20)
    const logged = relay
      .stdout()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
      .find((l) => l.request_id === m![2])
    expect(logged.status).toBe(404)
  })

  test('a validation error shows its details', async () => {
    const r = await cli(['profile', 'set', '--name', 'x'.repeat(300)])
    expect(r.code).toBe(1)
    expect(r.stderr).toMatch(/^relay: error: .+ \(code bad_request, request req_\S+\)\n  details: \{.*display_name.*\}\n$/)
  })

  test('a missing key file and an unreachable relay are explained', async () => {
    const noKey = await runCli(['whoami', '--relay', relay.url, '--key', 'none.key'], { cwd: dir })
    expect(noKey.code).toBe(1)
    expect(noKey.stderr).toContain(`relay: error: no key file at ${join(dir, 'none.key')} (create one with "relay keygen`)
    const port = await freePort()
    const down = await runCli(['whoami', '--relay', `http://127.0.0.1:${port}`, '--key', 'agent.key'], { cwd: dir })
    expect(down.code).toBe(1)
    expect(down.stderr).toStartWith(`relay: error: cannot reach the relay at http://127.0.0.1:${port}`)
  })

  test('--relay with /v1 (or another path) is answered with a hint to drop it', async () => {
    for (const url of [`${relay.url}/v1`, `${relay.url}/v1/`]) {
      const r = await runCli(['whoami', '--relay', url, '--key', 'agent.key'], { cwd: dir })
      expect(r.code).toBe(1)
      expect(r.stderr).toMatch(/^relay: error: No such route \(code not_found, request req_\S+\)\n/)
      expect(r.stderr).toEndWith(`  hint: --relay is the relay's address without /v1 (every command adds it): try --relay ${relay.url}\n`)
    }
    const other = await runCli(['whoami', '--relay', `${relay.url}/api`, '--key', 'agent.key'], { cwd: dir })
    expect(other.stderr).toContain(`hint: --relay ${relay.url}/api has the path /api; the relay answers at its address with paths starting /v1/ (try --relay ${relay.url})`)
    // an unknown agent is a not-found of another kind: no hint
    expect((await cli(['profile', 'get', generateKeyPair().publicKey])).stderr).not.toContain('hint')
  })

  test('usage errors exit 2 and point at --help', async () => {
    const r = await cli(['profile', 'set'])
    expect(r.code).toBe(2)
    expect(r.stderr).toBe(
      'relay: error: nothing to change: give at least one of --name, --visibility, --inbox-policy, --metadata, --capabilities, --encryption\n' +
        'usage: relay profile set [flags] (see relay profile set --help)\n',
    )
    expect(r.stdout).toBe('')
    // the rest in process: same runner, no process start
    const cases = [['get'], ['whoami', '--bogus'], ['whoami', 'extra'], ['acl', 'set', me, 'maybe'], ['profile'], ['profile', 'frob'], ['whoami', '--relay', 'ftp://x'], ['get', 'a', '--json', '--json'], ['thread', 't', '--limit', '0']]
    for (const args of cases) {
      const io = captureIo(dir)
      const code = await runClientCommand([...args, '--key', 'agent.key'], io)
      expect([args.join(' '), code]).toEqual([args.join(' '), 2])
      expect(io.err()).toStartWith('relay: error: ')
      expect(io.out()).toBe('')
    }
  })
})

describe('help', () => {
  test('--help on every command, without a key or a relay', async () => {
    for (const c of CLIENT_COMMANDS) {
      const io = captureIo(dir)
      const code = await runClientCommand([...c.name.split(' '), '--help'], io)
      expect([c.name, code]).toEqual([c.name, 0])
      expect(io.out()).toStartWith(`relay ${c.name}`)
      expect(io.out()).toContain('Global flags:\n  --relay URL')
      for (const f of c.flags ?? []) expect(io.out()).toContain(`--${f.name}`)
    }
    // and through the binary: the top-level list, help for a command, a group, `relay help …`
    const [top, one, group, viaHelp] = await Promise.all([
      runCli(['--help'], { cwd: dir }),
      runCli(['discover', '--help'], { cwd: dir }),
      runCli(['acl', '--help'], { cwd: dir }),
      runCli(['help', 'profile', 'set'], { cwd: dir }),
    ])
    for (const c of CLIENT_COMMANDS) expect(top.stdout).toContain(`relay ${c.name}`)
    expect(one.code).toBe(0)
    expect(one.stdout).toStartWith('relay discover [flags]\n')
    expect(one.stdout).toContain('--tag TAG')
    expect(group.stdout).toContain('relay acl delete PEER_KEY')
    expect(viaHelp.stdout).toStartWith('relay profile set')
  })
})

describe('terminal and pipe', () => {
  test('output on a terminal is the same plain text as when piped', async () => {
    if (!Bun.which('script')) return
    const piped = await cli(['whoami'])
    const tty = spawnSync(['script', '-qec', `'${BINARY}' whoami --relay ${relay.url} --key agent.key`, '/dev/null'], { cwd: dir, env: { PATH: process.env.PATH ?? '' } })
    expect(tty.exitCode).toBe(0)
    const stable = (text: string) => text.replace(/\r\n/g, '\n').replace(/last active .*/, 'last active')
    expect(stable(tty.stdout.toString())).toBe(stable(piped.stdout))
    expect(tty.stdout.toString()).not.toContain('\x1b[')
  })
})

describe('serve', () => {
  test('on a busy port it fails before creating the data directory, and says which address', async () => {
    const taken = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } })
    try {
      const dataDir = join(dir, 'never-created')
      const r = spawnSync([BINARY, 'serve', '--port', String(taken.port), '--host', '127.0.0.1', '--data-dir', dataDir], { cwd: dir, env: { PATH: process.env.PATH ?? '' }, stdout: 'pipe', stderr: 'pipe' })
      expect(r.exitCode).toBe(1)
      expect(r.stderr.toString()).toBe(`relay: error: the address 127.0.0.1:${taken.port} is in use (is another relay running?); choose another with --port or RELAY_PORT\n`)
      expect(existsSync(dataDir)).toBe(false)
    } finally {
      taken.stop(true)
    }
  })
})
