/**
 * Operator admission: allowlist and existing-only modes, the agent cap, the per-address new-agent rate,
 * the relay-wide blob cap and the free-disk floor; `relay admin allow|revoke|allowed` reaching a running
 * relay. A refused key never gets an agent record and costs no disk.
 */
import { afterEach, describe, expect, test } from 'bun:test'
import { readdirSync } from 'node:fs'
import { spawnSync } from 'bun'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { RelayClient } from '../../src/client/index.ts'
import type { ConfigOverrides } from '../../src/config/config.ts'
import { buildBinary } from '../support/binary.ts'
import { expectError, startTestRelay, type TestRelay } from '../support/harness.ts'
import { enc, uploadRequest } from '../blobs/helpers.ts'

let open: TestRelay[] = []
afterEach(async () => {
  for (const t of open) await t.close()
  open = []
})

async function relay(overrides: ConfigOverrides = {}) {
  const t = await startTestRelay(overrides)
  open.push(t)
  return t
}

const exists = async (t: TestRelay, key: string) => (await t.relay.storage.agents.find(key)) !== null

describe('RELAY_ADMISSION=allowlist', () => {
  test('only listed keys make requests or get a record; revoking reaches the running relay', async () => {
    const t = await relay({ admission: { mode: 'allowlist' } })
    const listed = generateKeyPair()
    const stranger = generateKeyPair()
    await t.relay.admission.allow(listed.publicKey, 'the first agent')
    const before = await t.replayEntries()
    const res = await t.client(stranger).transport.send('GET', `/v1/agents/${stranger.publicKey}`)
    const err = await expectError(res, 403, 'forbidden')
    expect(err.message).toMatch(/listed/)
    expect(await exists(t, stranger.publicKey)).toBe(false)
    // a refused key stores nothing at all, not even the replay entry of its signature
    expect(await t.replayEntries()).toBe(before)
    expect((await t.client(listed).getAgent()).public_key).toBe(listed.publicKey)
    // another process (relay admin revoke) edits the list: the relay sees it at its next watch
    await t.relay.storage.admission.revoke(listed.publicKey)
    await t.relay.watchSuspensions()
    await expectError(await t.client(listed).transport.send('GET', `/v1/agents/${listed.publicKey}`), 403, 'forbidden')
  })

  test('an unlisted key uploading a blob costs no disk and gets 403', async () => {
    const t = await relay({ admission: { mode: 'allowlist' } })
    const stranger = generateKeyPair()
    const bytes = new Uint8Array(512 * 1024).fill(7)
    let written = 0
    const watch = setInterval(() => (written = Math.max(written, readdirSync(t.relay.paths.tmp).length)), 1)
    await expectError(await t.handle(uploadRequest(t, stranger, bytes)), 403, 'forbidden')
    clearInterval(watch)
    expect(written).toBe(0)
    expect(readdirSync(t.relay.paths.tmp)).toEqual([])
    expect(await exists(t, stranger.publicKey)).toBe(false)
  })
})

describe('RELAY_ADMISSION=existing', () => {
  test('agents that exist keep working; new keys get 403 and no record', async () => {
    const t = await relay()
    const old = t.client()
    await old.getAgent()
    t.relay.admission.options.mode = 'existing'
    expect((await old.getAgent()).public_key).toBe(old.publicKey)
    const fresh = generateKeyPair()
    await expectError(await t.client(fresh).transport.send('GET', `/v1/agents/${fresh.publicKey}`), 403, 'forbidden')
    expect(await exists(t, fresh.publicKey)).toBe(false)
  })
})

describe('caps', () => {
  test('RELAY_MAX_AGENTS: a new key beyond it gets 403; known agents go on', async () => {
    const t = await relay({ admission: { maxAgents: 2 } })
    const [a, b] = [t.client(), t.client()]
    await a.getAgent()
    await b.getAgent()
    const c = generateKeyPair()
    const err = await expectError(await t.client(c).transport.send('GET', `/v1/agents/${c.publicKey}`), 403, 'forbidden')
    expect(err.details).toEqual({ max_agents: 2 })
    expect(await exists(t, c.publicKey)).toBe(false)
    expect((await a.getAgent()).public_key).toBe(a.publicKey)
  })

  test('per-address new-agent rate, over real HTTP from one address', async () => {
    const t = await relay({ host: '127.0.0.1', rateLimits: { newAgentsPerHour: 3, addressExempt: '', addressPerMin: 0 } })
    const { url } = await t.relay.start()
    const client = () => new RelayClient({ baseUrl: url, keys: generateKeyPair(), now: () => t.clock.now(), rateLimitRetry: false })
    for (let i = 0; i < 3; i++) await client().getAgent()
    const fourth = client()
    await expectError(await fourth.transport.send('GET', `/v1/agents/${fourth.publicKey}`), 429, 'rate_limit_exceeded')
    expect(await exists(t, fourth.publicKey)).toBe(false)
    t.clock.advance(3_600_000)
    expect((await fourth.getAgent()).public_key).toBe(fourth.publicKey)
  })

  test('RELAY_BLOB_TOTAL_QUOTA: 507 once all agents together would pass it', async () => {
    const t = await relay({ blobs: { totalQuotaBytes: 1000 } })
    const [a, b] = [t.client(), t.client()]
    expect((await t.handle(uploadRequest(t, a.transport.keys, new Uint8Array(600).fill(1)))).status).toBe(201)
    const err = await expectError(await t.handle(uploadRequest(t, b.transport.keys, new Uint8Array(600).fill(2))), 507, 'insufficient_storage')
    expect(err.message).toMatch(/full/)
    expect((await t.handle(uploadRequest(t, b.transport.keys, new Uint8Array(300).fill(3)))).status).toBe(201)
  })

  test('RELAY_MIN_FREE_DISK: an upload that would pass the floor is refused with 507 before it is written', async () => {
    const t = await relay({ blobs: { minFreeDiskBytes: 2 ** 52 } })
    const a = t.client()
    const err = await expectError(await t.handle(uploadRequest(t, a.transport.keys, enc('would not fit'))), 507, 'insufficient_storage')
    expect(err.message).toMatch(/disk/)
    expect(readdirSync(t.relay.paths.tmp)).toEqual([])
    // messages are small: they keep working
    expect((await a.send({ recipient_key: a.publicKey, body: { still: 'works' } })).status).toBe('sent')
  })
})

describe('relay admin allow / revoke / allowed', () => {
  test('edit the allowlist of a data directory while the relay runs; the relay applies it', async () => {
    const bin = await buildBinary()
    const t = await relay({ admission: { mode: 'allowlist' } })
    const keys = generateKeyPair()
    // the relay's own storage: its data directory, or its database in cluster mode
    const admin = (...args: string[]) => spawnSync([bin, 'admin', ...args, '--data-dir', t.dataDir], { env: { ...process.env, RELAY_DATABASE_URL: t.relay.config.database.url } })
    await expectError(await t.client(keys).transport.send('GET', `/v1/agents/${keys.publicKey}`), 403, 'forbidden')
    const allow = admin('allow', keys.publicKey, '--note', 'ci agent')
    expect(allow.exitCode).toBe(0)
    expect(allow.stdout.toString()).toBe(`allowed ${keys.publicKey}\n`)
    const listed = JSON.parse(admin('allowed', '--json').stdout.toString())
    expect(listed.allowed).toMatchObject([{ public_key: keys.publicKey, note: 'ci agent' }])
    await t.relay.watchSuspensions()
    expect((await t.client(keys).getAgent()).public_key).toBe(keys.publicKey)
    expect(admin('revoke', keys.publicKey).exitCode).toBe(0)
    const again = admin('revoke', keys.publicKey)
    expect(again.exitCode).toBe(1)
    expect(again.stderr.toString()).toMatch(/not on the allowlist/)
    await t.relay.watchSuspensions()
    await expectError(await t.client(keys).transport.send('GET', `/v1/agents/${keys.publicKey}`), 403, 'forbidden')
    expect(admin('allow', 'not-a-key').exitCode).toBe(2)
  })
})
