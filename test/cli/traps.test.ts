/**
 * The traps of a first hour with the command line, through the built binary: output closed early
 * (EPIPE), a relay on another port, one error prefix, `relay health`, the everyday commands for
 * deleting your agent and handling blobs, and shell completion.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { spawn, spawnSync } from 'bun'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { RelayClient } from '../../src/client/index.ts'
import { BINARY, freePort, startBinary } from '../support/binary.ts'
import { runCli, startCliRelay, type CliRelay } from '../support/cli.ts'
import { requireProgram } from '../support/requires.ts'

let f: CliRelay
beforeAll(async () => {
  f = await startCliRelay('relay-traps-')
}, 120_000)
afterAll(() => f.close())

/** Runs a shell line with the binary as $R; returns its exit code, stdout and stderr. */
async function sh(line: string, env: Record<string, string> = {}) {
  const p = spawn(['bash', '-o', 'pipefail', '-c', line], { cwd: f.dir, env: { PATH: process.env.PATH ?? '', R: BINARY, ...env }, stdout: 'pipe', stderr: 'pipe' })
  const [code, stdout, stderr] = await Promise.all([p.exited, new Response(p.stdout).text(), new Response(p.stderr).text()])
  return { code, stdout, stderr }
}

describe('output closed before the command is done', () => {
  test('every kind of command exits 0 without a word on stderr when its reader has gone', async () => {
    const flags = `--relay ${f.relay.url} --key agent.key`
    const commands = [
      '--help',
      '--version',
      'serve --help',
      'completion bash',
      `whoami ${flags}`,
      `whoami --json ${flags}`,
      `profile get ${flags}`,
      `discover --tag nothing ${flags}`,
      `poll ${flags}`,
      `capabilities ${flags}`,
      `admin stats --data-dir ${join(f.dir, 'data')}`,
      `health --url ${f.relay.url}`,
    ]
    for (const c of commands) {
      // the reader closes its end at once, so every write of the command meets a closed pipe
      const r = await sh(`$R ${c} | (exec <&-; sleep 0.3)`)
      expect([c, r.code, r.stderr]).toEqual([c, 0, ''])
    }
  }, 120_000)

  test('relay whoami | head -1, the README example, prints the key and nothing else, every time', async () => {
    for (let i = 0; i < 8; i++) {
      const r = await sh(`$R whoami --relay ${f.relay.url} --key agent.key | head -1`)
      expect([r.code, r.stdout, r.stderr]).toEqual([0, `${f.me}\n`, ''])
    }
  }, 60_000)
})

describe('a relay on another port', () => {
  test('the start-up line names the RELAY_URL to use, and agent commands work with it', async () => {
    const port = await freePort()
    const other = await startBinary({ cwd: f.dir, dataDir: join(f.dir, 'data-9000'), port })
    try {
      const started = JSON.parse(other.stdout().split('\n').find((l) => l.includes('"relay started"')) ?? '{}')
      expect(started.relay_url).toBe(`http://127.0.0.1:${port}`)
      expect(started.hint).toBe(`agent commands: export RELAY_URL=http://127.0.0.1:${port} (or pass --relay http://127.0.0.1:${port})`)
      const r = await runCli(['whoami'], { cwd: f.dir, env: { RELAY_URL: started.relay_url, RELAY_KEY_FILE: 'agent.key' } })
      expect([r.code, r.stdout.split('\n')[0]]).toEqual([0, f.me])
    } finally {
      other.proc.kill('SIGTERM')
      await other.proc.exited
    }
  }, 60_000)

  test('on the default port there is nothing to export', async () => {
    const started = JSON.parse(f.relay.stdout().split('\n').find((l) => l.includes('"relay started"')) ?? '{}')
    expect(started.relay_url).toBe(f.relay.url)
  })
})

describe('one error prefix', () => {
  test('usage, configuration, client and relay errors all start with "relay: error: "', async () => {
    const cases = [
      await runCli(['nope'], { cwd: f.dir }),
      await runCli(['serve', '--bogus'], { cwd: f.dir }),
      await runCli(['serve'], { cwd: f.dir, env: { RELAY_PORT: 'eighty' } }),
      await runCli(['admin', 'stats', '--data-dir', join(f.dir, 'nowhere')], { cwd: f.dir }),
      await f.cli(['profile', 'set']),
      await f.cli(['get', 'msg_1_000000000000']),
      await runCli(['whoami', '--key', 'none.key'], { cwd: f.dir }),
    ]
    for (const r of cases) {
      expect(r.code).not.toBe(0)
      expect([r.stderr.split('\n')[0].startsWith('relay: error: '), r.stderr]).toEqual([true, r.stderr])
    }
    expect(cases.map((r) => r.code)).toEqual([2, 2, 1, 1, 2, 1, 1])
  }, 60_000)
})

describe('relay health', () => {
  test('exits 0 when the relay is ready, 1 when nothing answers, 2 for a bad URL', async () => {
    const ok = await runCli(['health', '--url', f.relay.url], { cwd: f.dir })
    expect([ok.code, ok.stdout]).toEqual([0, `ok ${f.relay.url}/v1/health/ready\n`])
    const json = await runCli(['health', '--url', f.relay.url, '--json'], { cwd: f.dir })
    expect(JSON.parse(json.stdout)).toMatchObject({ ok: true, status: 200, body: { status: 'ok' } })
    const down = await runCli(['health', '--url', `http://127.0.0.1:${await freePort()}`, '--timeout', '2'], { cwd: f.dir })
    expect(down.code).toBe(1)
    expect(down.stderr).toStartWith('relay: error: http://127.0.0.1:')
    const bad = await runCli(['health', '--url', 'ftp://x'], { cwd: f.dir })
    expect(bad.code).toBe(2)
  }, 30_000)

  test('without --url it asks the relay the configuration describes (RELAY_PORT)', async () => {
    const r = await runCli(['health'], { cwd: f.dir, env: { RELAY_PORT: String(f.relay.port), RELAY_HOST: '0.0.0.0' } })
    expect([r.code, r.stdout]).toEqual([0, `ok ${f.relay.url}/v1/health/ready\n`])
  })
})

describe('everyday commands', () => {
  test('blob info and delete; send --blob attaches an uploaded blob; agent delete asks for --yes', async () => {
    writeFileSync(join(f.dir, 'note.txt'), 'hello blob\n')
    const up = JSON.parse((await f.cli(['upload', 'note.txt', '--json'])).stdout)
    const info = await f.cli(['blob', 'info', up.blob_id, '--json'])
    expect(JSON.parse(info.stdout)).toEqual({ blob_id: up.blob_id, size: 11, content_type: up.content_type, hash: up.hash })
    const text = await f.cli(['blob', 'info', up.blob_id])
    expect(text.stdout).toContain(`sha256        ${up.hash}`)

    const peer = generateKeyPair()
    const sent = await f.cli(['send', '--to', peer.publicKey, '--blob', up.blob_id, '--text', 'see attached', '--json'])
    expect(sent.code).toBe(0)
    const peerClient = new RelayClient({ baseUrl: f.relay.url, keys: peer })
    const got = await peerClient.getMessage(JSON.parse(sent.stdout).message_id)
    expect(got.attachments?.map((a) => [a.blob_id, a.hash])).toEqual([[up.blob_id, up.hash]])

    const refused = await f.cli(['blob', 'delete', up.blob_id])
    expect([refused.code, refused.stderr.includes('code blob_referenced')]).toEqual([1, true])
    const other = JSON.parse((await f.cli(['upload', 'agent.key', '--json'])).stdout)
    expect((await f.cli(['blob', 'delete', other.blob_id])).stdout).toBe(`deleted ${other.blob_id}\n`)
    expect((await f.cli(['blob', 'info', other.blob_id])).stderr).toContain('code blob_not_found')

    await f.cli(['profile', 'set', '--name', 'Soon Gone'])
    const unconfirmed = await f.cli(['agent', 'delete'])
    expect(unconfirmed.code).toBe(2)
    expect(unconfirmed.stderr).toContain('add --yes to confirm')
    expect(JSON.parse((await f.cli(['profile', 'get', '--json'])).stdout).display_name).toBe('Soon Gone')
    const deleted = await f.cli(['agent', 'delete', '--yes'])
    expect([deleted.code, deleted.stdout]).toEqual([0, `deleted ${f.me}\n`])
    // the next signed request creates a fresh, empty agent
    expect(JSON.parse((await f.cli(['profile', 'get', '--json'])).stdout).display_name).toBeNull()
  }, 60_000)
})

describe('relay completion', () => {
  const script = () => spawnSync([BINARY, 'completion', 'bash']).stdout.toString()
  /** What bash completes for the words typed so far (the last one may be partial). */
  async function complete(words: string[]): Promise<string[]> {
    writeFileSync(join(f.dir, 'completion.bash'), script())
    const line = `source completion.bash; COMP_WORDS=(relay ${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length}; _relay; printf '%s\\n' "\${COMPREPLY[@]}"`
    const r = await sh(line)
    expect(r.stderr).toBe('')
    return r.stdout.split('\n').filter(Boolean).sort()
  }

  test('bash completes commands, subcommands and each command\'s flags', async () => {
    expect(await complete(['pro'])).toEqual(['profile'])
    expect(await complete(['profile', ''])).toEqual(['get', 'set'])
    expect(await complete(['admin', 's'])).toEqual(['stats', 'suspend'])
    expect(await complete(['send', '--b'])).toEqual(['--blob', '--body'])
    expect(await complete(['blob', ''])).toEqual(['delete', 'info'])
    expect(await complete(['agent', 'delete', '--y'])).toEqual(['--yes'])
    expect(await complete(['health', '--'])).toEqual(['--config', '--help', '--json', '--timeout', '--url'])
    expect(await complete(['send', '--to', 'KEY', '--re'])).toEqual(['--relay', '--reply-to'])
  })

  test('zsh loads the script and registers the completion', async () => {
    const zsh = Bun.which('zsh')
    if (!requireProgram('zsh', zsh, 'the zsh completion test')) return
    writeFileSync(join(f.dir, 'completion.zsh'), spawnSync([BINARY, 'completion', 'zsh']).stdout.toString())
    const r = spawnSync([zsh as string, '-f', '-c', 'autoload -U compinit && compinit -u && source ./completion.zsh && print -r -- ${_comps[relay]}'], { cwd: f.dir, env: { PATH: process.env.PATH ?? '', HOME: f.dir } })
    expect(r.stderr.toString()).toBe('')
    expect(r.stdout.toString()).toContain('_bash_complete')
  })

  test('an unknown shell is a usage error', async () => {
    const r = await runCli(['completion', 'fish'], { cwd: f.dir })
    expect([r.code, r.stderr]).toEqual([2, 'relay: error: completion needs a shell: bash or zsh (not "fish")\n'])
  })
})
