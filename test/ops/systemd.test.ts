/** deploy/relay.service: parses, carries the hardening the README promises, and its settings are valid. */
import { describe, expect, test } from 'bun:test'
import { spawn, spawnSync } from 'bun'
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { loadConfig } from '../../src/config/load.ts'
import { tempDir } from '../support/harness.ts'
import { ROOT, buildBinary, freePort } from '../support/binary.ts'

const UNIT = join(ROOT, 'deploy', 'relay.service')

/** systemd's unit syntax: [Section], Key=Value, # and ; comments, keys that may repeat. */
function parseUnit(text: string): Record<string, Record<string, string[]>> {
  const out: Record<string, Record<string, string[]>> = {}
  let section: Record<string, string[]> | undefined
  for (const [i, raw] of text.split('\n').entries()) {
    const line = raw.trim()
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue
    const head = /^\[([A-Za-z]+)\]$/.exec(line)
    if (head) {
      section = out[head[1]] ??= {}
      continue
    }
    const kv = /^([A-Za-z][A-Za-z0-9]*)=(.*)$/.exec(line)
    if (!kv || !section) throw new Error(`line ${i + 1} is not Key=Value inside a section: ${raw}`)
    ;(section[kv[1]] ??= []).push(kv[2])
  }
  return out
}

const unit = parseUnit(readFileSync(UNIT, 'utf8'))
const service = unit.Service
const one = (key: string) => service[key]?.at(-1)
const env = Object.fromEntries((service.Environment ?? []).map((e) => e.split('=', 2) as [string, string]))

describe('deploy/relay.service', () => {
  test('has the three sections and starts the installed binary', () => {
    expect(Object.keys(unit)).toEqual(['Unit', 'Service', 'Install'])
    expect(one('ExecStart')).toBe('/usr/local/bin/relay serve')
    expect(unit.Install.WantedBy).toEqual(['multi-user.target'])
    expect(unit.Unit.After).toContain('network-online.target')
  })

  test('runs as a dedicated user with its state in /var/lib/relay', () => {
    expect(one('User')).toBe('relay')
    expect(one('StateDirectory')).toBe('relay')
    expect(env.RELAY_DATA_DIR).toBe(`/var/lib/${one('StateDirectory')}`)
    expect(one('WorkingDirectory')).toBe(env.RELAY_DATA_DIR)
  })

  test('is hardened and restarts on failure', () => {
    const expected: Record<string, string> = {
      NoNewPrivileges: 'yes',
      ProtectSystem: 'strict',
      ProtectHome: 'yes',
      PrivateTmp: 'yes',
      PrivateDevices: 'yes',
      ProtectKernelTunables: 'yes',
      ProtectKernelModules: 'yes',
      ProtectControlGroups: 'yes',
      RestrictSUIDSGID: 'yes',
      RestrictNamespaces: 'yes',
      LockPersonality: 'yes',
      CapabilityBoundingSet: '',
      UMask: '0077',
      Restart: 'on-failure',
      KillSignal: 'SIGTERM',
    }
    for (const [key, value] of Object.entries(expected)) expect([key, one(key)]).toEqual([key, value])
    expect(one('RestrictAddressFamilies')?.split(' ').sort()).toEqual(['AF_INET', 'AF_INET6', 'AF_UNIX'])
    expect(one('MemoryDenyWriteExecute')).toBeUndefined() // the JIT needs it off
  })

  test('its environment is a valid relay configuration', async () => {
    const config = await loadConfig({ env, cwd: '/' })
    expect(config.dataDir).toBe('/var/lib/relay')
    expect(config.host).toBe('127.0.0.1')
    expect(config.port).toBe(8080)
  })

  test('systemd-analyze verify accepts it (when systemd-analyze is installed)', async () => {
    if (!Bun.which('systemd-analyze')) return
    const bin = await buildBinary()
    const dir = tempDir('relay-unit-')
    const copy = join(dir, 'relay.service')
    writeFileSync(copy, readFileSync(UNIT, 'utf8').replace('ExecStart=/usr/local/bin/relay', `ExecStart=${bin}`))
    const r = spawnSync(['systemd-analyze', 'verify', copy], { cwd: dir })
    rmSync(dir, { recursive: true })
    expect(r.stderr.toString()).toBe('')
    expect(r.exitCode).toBe(0)
  })

  test('the binary keeps its data where RELAY_DATA_DIR says, without flags; Documentation= is served', async () => {
    const bin = await buildBinary()
    const dir = tempDir('relay-unit-')
    const dataDir = join(dir, 'var', 'lib', 'relay')
    const port = await freePort()
    const proc = spawn([bin, 'serve'], { cwd: dir, env: { RELAY_DATA_DIR: dataDir, RELAY_PORT: String(port) }, stdout: 'ignore', stderr: 'pipe' })
    try {
      let ready = false
      for (let i = 0; i < 200 && !ready; i++) {
        ready = await fetch(`http://127.0.0.1:${port}/v1/health/ready`).then((r) => r.ok, () => false)
        if (!ready) await Bun.sleep(25)
      }
      expect(ready).toBe(true)
      expect(existsSync(join(dataDir, 'relay.db'))).toBe(true)
      expect(existsSync(join(dataDir, 'blobs'))).toBe(true)
      // Documentation= points at what the running service serves (on the unit's port)
      const docs = unit.Unit.Documentation.join(' ').split(/\s+/)
      expect(docs.length).toBeGreaterThan(0)
      for (const url of docs) {
        expect(url).toStartWith(`http://127.0.0.1:${env.RELAY_PORT}/`)
        const res = await fetch(url.replace(`:${env.RELAY_PORT}/`, `:${port}/`))
        expect([url, res.status]).toEqual([url, 200])
        await res.arrayBuffer()
      }
      // and `relay health` answers for it
      expect(spawnSync([bin, 'health', '--url', `http://127.0.0.1:${port}`]).exitCode).toBe(0)
    } finally {
      proc.kill('SIGTERM')
      expect(await proc.exited).toBe(0)
      rmSync(dir, { recursive: true })
    }
  })
})
