/** Configuration (docs/protocol.md §13): precedence, parsing, and one clear line for a bad value. */
import { afterAll, describe, expect, test } from 'bun:test'
import { rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { ConfigError, defaultConfig, loadConfig } from '../../src/config/load.ts'
import { OPTIONS } from '../../src/config/options.ts'
import { parseDurationMs, parseSizeBytes } from '../../src/lib/units.ts'
import { spawnSync } from 'bun'
import { parseArgs } from '../../src/cli/args.ts'
import { SERVE_FLAGS } from '../../src/cli/serve.ts'
import { tempDir } from '../support/harness.ts'

const dir = tempDir('relay-config-')
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe('defaults', () => {
  test('match docs/protocol.md §13', () => {
    const c = defaultConfig()
    expect(c.host).toBe('127.0.0.1')
    expect(c.port).toBe(8080)
    expect(c.dataDir).toBe('./data')
    expect(c.logLevel).toBe('info')
    expect(c.timestampToleranceMs).toBe(300_000)
    expect(c.rateLimits).toEqual({ sendPerMin: 30, pollPerMin: 120, pollRequestsPerMin: 600, requestsPerMin: 600, addressPerMin: 600, addressExempt: '127.0.0.0/8,::1', newAgentsPerHour: 100 })
    expect(c.admission).toEqual({ mode: 'open', maxAgents: 0 })
    expect(c.preauth).toEqual({ memoryBytes: 40 * 1024 ** 2, memoryPerAddressBytes: 8 * 1024 ** 2, bodyTimeoutMs: 30_000, diskBytes: 256 * 1024 ** 2 })
    expect(c.trustProxy).toBe('')
    expect(c.ws.preauthPerAddress).toBe(4)
    expect(c.ws.preauthMax).toBe(128)
    expect(c.blobs).toEqual({ store: '', maxSizeBytes: 100 * 1024 ** 2, quotaBytes: 1024 ** 3, totalQuotaBytes: 0, minFreeDiskBytes: 128 * 1024 ** 2, unattachedTtlMs: 86_400_000 })
    expect(c.messages.expiredRetentionMs).toBe(7 * 86_400_000)
    expect(c.ws.maxConnections).toBe(5)
    expect(c.webhooks.retryDelaysMs).toEqual([60_000, 300_000, 900_000, 1_800_000, 3_600_000, 7_200_000])
    expect(c.webhooks.timeoutMs).toBe(10_000)
    expect(c.webhooks.disableAfter).toBe(3)
    expect(c.webhooks.allowPrivateTargets).toBe(false)
    expect(c.sweepIntervalMs).toBe(30_000)
    expect(c.database.durability).toBe('process')
  })
  test('every option of the operator table (docs/protocol.md §13) has its variable', () => {
    const envs = OPTIONS.map((o) => o.env)
    for (const v of [
      'RELAY_HOST', 'RELAY_PORT', 'RELAY_DATA_DIR', 'RELAY_LOG_LEVEL', 'RELAY_TIMESTAMP_TOLERANCE', 'RELAY_RATE_SEND_PER_MIN',
      'RELAY_RATE_POLL_PER_MIN', 'RELAY_BLOB_MAX_SIZE', 'RELAY_BLOB_QUOTA', 'RELAY_BLOB_UNATTACHED_TTL', 'RELAY_EXPIRED_RETENTION',
      'RELAY_WS_MAX_CONNECTIONS', 'RELAY_WEBHOOK_RETRY_DELAYS', 'RELAY_WEBHOOK_TIMEOUT', 'RELAY_WEBHOOK_DISABLE_AFTER',
      'RELAY_WEBHOOK_ALLOW_PRIVATE_TARGETS', 'RELAY_SWEEP_INTERVAL',
    ]) expect(envs).toContain(v)
  })
  test('the repository relay.config.ts holds exactly the defaults', async () => {
    const fromRepo = await loadConfig({ cwd: join(import.meta.dir, '../..'), env: {} })
    expect({ ...fromRepo, dataDir: './data' }).toEqual(defaultConfig())
  })
})

describe('units', () => {
  test('durations', () => {
    expect(parseDurationMs('500ms')).toBe(500)
    expect(parseDurationMs('30s')).toBe(30_000)
    expect(parseDurationMs('5m')).toBe(300_000)
    expect(parseDurationMs('1h')).toBe(3_600_000)
    expect(parseDurationMs('7d')).toBe(604_800_000)
    expect(parseDurationMs('1.5s')).toBe(1500)
    expect(parseDurationMs('1500')).toBe(1500)
    for (const bad of ['', 's', '5 minutes', '-1s', '1w', 'abc']) expect(parseDurationMs(bad)).toBeNull()
  })
  test('sizes', () => {
    expect(parseSizeBytes('1B')).toBe(1)
    expect(parseSizeBytes('512KiB')).toBe(512 * 1024)
    expect(parseSizeBytes('100MiB')).toBe(100 * 1024 ** 2)
    expect(parseSizeBytes('1GiB')).toBe(1024 ** 3)
    expect(parseSizeBytes('1mib')).toBe(1024 ** 2)
    for (const bad of ['', 'MiB', '1MB', '-5', 'lots']) expect(parseSizeBytes(bad)).toBeNull()
  })
})

describe('precedence: defaults ← file ← env ← flags', () => {
  const file = join(dir, 'custom.config.ts')
  writeFileSync(file, `export default { port: 1111, host: '0.0.0.0', rateLimits: { sendPerMin: 5 }, webhooks: { allowPrivateTargets: true } }\n`)

  test('file over defaults', async () => {
    const c = await loadConfig({ cwd: dir, env: {}, flags: { config: file } })
    expect([c.port, c.host, c.rateLimits.sendPerMin, c.rateLimits.pollPerMin, c.webhooks.allowPrivateTargets]).toEqual([1111, '0.0.0.0', 5, 120, true])
  })
  test('env over file', async () => {
    const c = await loadConfig({ cwd: dir, env: { RELAY_PORT: '2222', RELAY_RATE_SEND_PER_MIN: '0' }, flags: { config: file } })
    expect([c.port, c.host, c.rateLimits.sendPerMin]).toEqual([2222, '0.0.0.0', 0])
  })
  test('flags over env', async () => {
    const c = await loadConfig({ cwd: dir, env: { RELAY_PORT: '2222', RELAY_DATA_DIR: '/tmp/x' }, flags: { config: file, port: '3333', 'data-dir': 'rel' } })
    expect(c.port).toBe(3333)
    expect(c.dataDir).toBe(join(dir, 'rel'))
  })
  test('durability: variable, flag over it, file key', async () => {
    expect((await loadConfig({ cwd: dir, env: { RELAY_DURABILITY: 'process' } })).database.durability).toBe('process')
    expect((await loadConfig({ cwd: dir, env: { RELAY_DURABILITY: 'process' }, flags: { durability: 'fsync' } })).database.durability).toBe('fsync')
    const f = join(dir, 'durability.config.ts')
    writeFileSync(f, `export default { database: { durability: 'process' } }\n`)
    expect((await loadConfig({ cwd: dir, env: {}, flags: { config: f } })).database.durability).toBe('process')
  })
  test('the database pool size: default, variable, flag; fewer than 2 refused', async () => {
    expect((await loadConfig({ cwd: dir, env: {} })).database.poolSize).toBe(10)
    expect((await loadConfig({ cwd: dir, env: { RELAY_DB_POOL_SIZE: '4' } })).database.poolSize).toBe(4)
    expect((await loadConfig({ cwd: dir, env: { RELAY_DB_POOL_SIZE: '4' }, flags: { 'db-pool-size': '6' } })).database.poolSize).toBe(6)
    expect(await loadConfig({ cwd: dir, env: { RELAY_DB_POOL_SIZE: '1' } }).catch((e) => String(e))).toContain('RELAY_DB_POOL_SIZE')
  })
  test('an empty variable is unset, except for free text where empty is the value', async () => {
    const c = await loadConfig({ cwd: dir, env: { RELAY_PORT: '', RELAY_RATE_ADDRESS_EXEMPT: '' }, flags: { config: file } })
    expect(c.port).toBe(1111)
    expect(c.rateLimits.addressExempt).toBe('')
    expect((await loadConfig({ cwd: dir, env: {} })).rateLimits.addressExempt).toBe('127.0.0.0/8,::1')
  })
  test('relay.config.ts in the working directory is picked up', async () => {
    const d = tempDir('relay-config-cwd-')
    writeFileSync(join(d, 'relay.config.ts'), `export default { sweepInterval: '5s' }\n`)
    expect((await loadConfig({ cwd: d, env: {} })).sweepIntervalMs).toBe(5000)
    rmSync(d, { recursive: true })
  })
})

describe('a bad value stops start-up with one line naming the variable', () => {
  const bad: [Record<string, string>, string][] = [
    [{ RELAY_PORT: '70000' }, 'RELAY_PORT'],
    [{ RELAY_PORT: 'http' }, 'RELAY_PORT'],
    [{ RELAY_LOG_LEVEL: 'loud' }, 'RELAY_LOG_LEVEL'],
    [{ RELAY_TIMESTAMP_TOLERANCE: 'soon' }, 'RELAY_TIMESTAMP_TOLERANCE'],
    [{ RELAY_RATE_SEND_PER_MIN: '-1' }, 'RELAY_RATE_SEND_PER_MIN'],
    [{ RELAY_RATE_POLL_PER_MIN: '1.5' }, 'RELAY_RATE_POLL_PER_MIN'],
    [{ RELAY_BLOB_MAX_SIZE: '100MB' }, 'RELAY_BLOB_MAX_SIZE'],
    [{ RELAY_WEBHOOK_RETRY_DELAYS: '1m,,5x' }, 'RELAY_WEBHOOK_RETRY_DELAYS'],
    [{ RELAY_WEBHOOK_ALLOW_PRIVATE_TARGETS: 'perhaps' }, 'RELAY_WEBHOOK_ALLOW_PRIVATE_TARGETS'],
    [{ RELAY_WS_MAX_CONNECTIONS: '0' }, 'RELAY_WS_MAX_CONNECTIONS'],
    [{ RELAY_METRICS_ADDR: 'nohost' }, 'RELAY_METRICS_ADDR'],
    [{ RELAY_TRUST_PROXY: 'true' }, 'RELAY_TRUST_PROXY'],
    [{ RELAY_TRUST_PROXY: '0.0.0.0/0' }, 'RELAY_TRUST_PROXY'],
    [{ RELAY_TRUST_PROXY: '127.0.0.1, ::/0' }, 'RELAY_TRUST_PROXY'],
    [{ RELAY_TRUST_PROXY: 'proxy.local' }, 'RELAY_TRUST_PROXY'],
    [{ RELAY_RATE_ADDRESS_EXEMPT: '0.0.0.0/0' }, 'RELAY_RATE_ADDRESS_EXEMPT'],
    [{ RELAY_RATE_ADDRESS_EXEMPT: '::/0' }, 'RELAY_RATE_ADDRESS_EXEMPT'],
    [{ RELAY_WS_PREAUTH_PER_ADDRESS: '-1' }, 'RELAY_WS_PREAUTH_PER_ADDRESS'],
    [{ RELAY_DURABILITY: 'sometimes' }, 'RELAY_DURABILITY'],
  ]
  for (const [env, name] of bad) {
    test(`${name}=${Object.values(env)[0]}`, async () => {
      const err = await loadConfig({ cwd: dir, env }).then(
        () => null,
        (e) => e,
      )
      expect(err).toBeInstanceOf(ConfigError)
      expect(err.message).toContain(name)
      expect(err.message).not.toContain('\n')
    })
  }
  test('RELAY_TRUST_PROXY takes the proxies\' addresses; false or empty means none', async () => {
    expect((await loadConfig({ cwd: dir, env: { RELAY_TRUST_PROXY: '127.0.0.1, ::1' } })).trustProxy).toBe('127.0.0.1, ::1')
    expect((await loadConfig({ cwd: dir, env: { RELAY_TRUST_PROXY: 'false' } })).trustProxy).toBe('')
    expect((await loadConfig({ cwd: dir, env: { RELAY_TRUST_PROXY: '' } })).trustProxy).toBe('')
  })
  test('an unknown key in the config file', async () => {
    const f = join(dir, 'typo.config.ts')
    writeFileSync(f, `export default { prot: 1 }\n`)
    await expect(loadConfig({ cwd: dir, env: {}, flags: { config: f } })).rejects.toThrow('unknown option "prot"')
  })
  test('a missing --config file', async () => {
    await expect(loadConfig({ cwd: dir, env: {}, flags: { config: 'nope.ts' } })).rejects.toThrow('file not found')
  })
  test('a bad flag value names the flag', async () => {
    await expect(loadConfig({ cwd: dir, env: {}, flags: { port: 'x' } })).rejects.toThrow('--port')
  })
})

describe('every option has an environment variable and a flag that `relay serve` accepts', () => {
  const defaultConfigIn = (cwd: string) => loadConfig({ cwd, env: {}, flags: {} })
  test('the table: RELAY_* variables and --flags, each unique', () => {
    const envs = new Set(OPTIONS.map((o) => o.env))
    const flags = new Set(OPTIONS.map((o) => o.flag))
    expect([envs.size, flags.size]).toEqual([OPTIONS.length, OPTIONS.length])
    for (const o of OPTIONS) {
      expect([o.key, /^RELAY_[A-Z0-9_]+$/.test(o.env)]).toEqual([o.key, true])
      expect([o.key, /^--[a-z0-9-]+$/.test(o.flag)]).toEqual([o.key, true])
      expect([o.key, SERVE_FLAGS.includes(o.flag.slice(2))]).toEqual([o.key, true])
    }
    expect(OPTIONS.find((o) => o.key === 'admission.mode')?.flag).toBe('--admission')
  })
  for (const o of OPTIONS) {
    test(`${o.flag} is parsed by the command line and does what ${o.env} does`, async () => {
      const args = parseArgs([o.flag, 'not-a-value!'], { known: SERVE_FLAGS })
      expect(args.flags[o.flag.slice(2)]).toBe('not-a-value!')
      const viaEnv = await loadConfig({ cwd: dir, env: { [o.env]: 'not-a-value!' }, flags: {} }).then((config) => ({ config }), (e: Error) => ({ error: e.message }))
      const viaFlag = await loadConfig({ cwd: dir, env: {}, flags: args.flags }).then((config) => ({ config }), (e: Error) => ({ error: e.message }))
      if ('error' in viaEnv) {
        expect('error' in viaFlag).toBe(true)
        expect((viaFlag as { error: string }).error).toContain(o.flag)
        expect((viaFlag as { error: string }).error).toBe((viaEnv.error as string).replace(o.env, o.flag))
      } else {
        expect(viaFlag).toEqual(viaEnv)
        expect(viaEnv).not.toEqual({ config: await defaultConfigIn(dir) })
      }
    })
  }
  test('relay serve --admission reaches the configuration (the bad value is named, not an unknown flag)', () => {
    const r = spawnSync([process.execPath, join(import.meta.dir, '../../src/main.ts'), 'serve', '--admission', 'nope', '--data-dir', join(dir, 'never')], {
      env: { PATH: process.env.PATH ?? '' },
      stderr: 'pipe',
    })
    expect(r.exitCode).toBe(1)
    expect(r.stderr.toString()).toContain('--admission: must be one of open, allowlist, existing')
  })
})
