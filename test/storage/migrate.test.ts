/**
 * `relay migrate`: a SQLite relay filled through its HTTP API is moved into a fresh PostgreSQL database
 * and an S3-compatible bucket (real servers: initdb/pg_ctl and s3rver), by the command line as an
 * operator runs it. Then a relay opened on the migrated storage serves the same agents, messages,
 * blobs, ACLs, webhook and allowlist; a second run copies nothing; what cannot be copied exits 1
 * naming it; an unreachable target fails with one line.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { Database } from 'bun:sqlite'
import { SQL, spawn, type Subprocess } from 'bun'
import { cpSync, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { s3StoreFromUrl } from '../../src/blobs/s3/s3-blob-store.ts'
import { keyPairFromSeed, RelayClient } from '../../src/client/index.ts'
import { withOverrides } from '../../src/config/load.ts'
import { FakeClock } from '../../src/lib/clock.ts'
import { silentLogger } from '../../src/lib/logger.ts'
import { createRelay, type Relay } from '../../src/relay.ts'
import { openPostgres } from '../../src/storage/postgres/open-postgres.ts'
import { BASE_URL, tempDir } from '../support/harness.ts'
import { findPostgres, startPostgres, type TestPostgres } from '../support/postgres.ts'
import { requireProgram } from '../support/requires.ts'
import { s3ServerRunner, startS3Server, type S3Server } from '../support/s3.ts'
import type { SeedReport } from './migrate-seed.ts'

const MAIN = resolve(import.meta.dir, '../../src/main.ts')
const SEED = resolve(import.meta.dir, 'migrate-seed.ts')
const pgBin = findPostgres()
const node = requireProgram('PostgreSQL', pgBin, 'relay migrate into PostgreSQL') ? s3ServerRunner('relay migrate into a bucket') : null

interface Run {
  code: number
  stdout: string
  stderr: string
}

/** `relay migrate …` as an operator runs it: its own process, from a directory without relay.config.ts. */
async function relayMigrate(args: string[], env: Record<string, string | undefined> = {}): Promise<Run> {
  const proc = spawn([process.execPath, MAIN, 'migrate', ...args], {
    cwd: work,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const [code, stdout, stderr] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()])
  return { code, stdout, stderr }
}

let work: string
let pg: TestPostgres
let s3: S3Server
/** The relay the data comes from: its own process, as a running relay would be. */
let seeder: Subprocess<'pipe', 'pipe', 'inherit'>
let seeded: SeedReport
let target: string

const sha256Hex = (b: Uint8Array) => new Bun.CryptoHasher('sha256').update(b).digest('hex')
const seededBlobs = () => new Map(Object.entries(seeded.blobs).map(([id, b64]) => [id, new Uint8Array(Buffer.from(b64, 'base64'))]))

/** Reads the source database (closed again at once: the command refuses while a process holds it). */
function readSource<T>(fn: (db: Database) => T, dataDir = seeded.dataDir): T {
  const db = new Database(join(dataDir, 'relay.db'), { readonly: true })
  try {
    return fn(db)
  } finally {
    db.close()
  }
}

async function firstLine(stream: ReadableStream<Uint8Array>): Promise<string> {
  const reader = stream.getReader()
  let text = ''
  while (!text.includes('\n')) {
    const { done, value } = await reader.read()
    if (done) break
    text += new TextDecoder().decode(value)
  }
  reader.releaseLock()
  return text.split('\n')[0]
}

describe.skipIf(!node)('relay migrate', () => {
  beforeAll(async () => {
    work = tempDir('relay-migrate-')
    ;[pg, s3] = await Promise.all([startPostgres(pgBin!), startS3Server(node!)])
    seeder = spawn([process.execPath, SEED, join(work, 'data')], { cwd: work, stdin: 'pipe', stdout: 'pipe', stderr: 'inherit' })
    seeded = JSON.parse(await firstLine(seeder.stdout))
    target = await pg.createDatabase('migrated')
  }, 60_000)

  afterAll(async () => {
    seeder?.kill()
    await Promise.all([pg?.remove(), s3?.stop()])
    rmSync(work, { recursive: true, force: true })
  })

  // where /proc is missing the command cannot tell, and the documentation asks for the relay to be stopped
  test.skipIf(!existsSync('/proc/self/fd'))('refuses, with one line, while the relay still has its database open', async () => {
    const run = await relayMigrate(['--to', target, '--data-dir', seeded.dataDir])
    expect(run.code).toBe(1)
    expect(run.stdout).toBe('')
    expect(run.stderr).toBe(`relay: error: ${join(seeded.dataDir, 'relay.db')} is open in process ${seeder.pid} (a relay still running?): stop the relay, then migrate\n`)
    // nothing was written to the target
    expect(await rowCounts(target).catch((err) => String(err))).toMatch(/relation "agents" does not exist/)
    seeder.stdin.end()
    expect(await seeder.exited).toBe(0)
  }, 30_000)

  test('copies every table and blob into an empty database and bucket, and verifies them', async () => {
    const run = await relayMigrate(['--to', target, '--blobs', s3.url('cluster/'), '--data-dir', seeded.dataDir, '--json'], s3.env)
    expect(run.stderr).toContain('migrate: copying')
    expect({ code: run.code, errors: run.stderr.split('\n').filter((l) => l.startsWith('relay: error')) }).toEqual({ code: 0, errors: [] })
    const report = JSON.parse(run.stdout)
    expect(report.ok).toBe(true)
    expect(report.mismatches).toEqual([])
    expect(report.rows.copied).toBe(report.rows.source)
    expect(report.rows.already_present).toBe(0)
    expect(report.seconds).toBeGreaterThan(0)
    expect(report.target).toEqual({ database: target.replace('postgres://postgres@', 'postgres://postgres@'), blobs: s3.url('cluster/') })

    const counts = readSource((db) => {
      const out: Record<string, number> = {}
      for (const { name } of db.query(`SELECT name FROM sqlite_master WHERE type = 'table'`).all() as { name: string }[]) {
        out[name] = (db.query(`SELECT count(*) AS n FROM "${name}"`).get() as { n: number }).n
      }
      return out
    })
    const count = (table: string) => counts[table]
    const statuses = readSource((db) => (db.query(`SELECT count(DISTINCT status) AS n FROM messages`).get() as { n: number }).n)
    const byTable = new Map<string, any>(report.tables.map((t: any) => [t.table, t]))
    for (const table of ['agents', 'agent_tags', 'messages', 'message_blobs', 'acl_entries', 'blobs', 'blob_contents', 'webhooks', 'webhook_deliveries', 'replay_log', 'relay_state', 'admitted_keys']) {
      const row = byTable.get(table)
      expect({ table, source: row.source_rows, copied: row.copied, target: row.target_rows }).toEqual({ table, source: count(table), copied: count(table), target: count(table) })
    }
    // the seed holds something of each kind
    expect(count('messages')).toBe(5)
    expect(statuses).toBe(3)
    expect(count('webhook_deliveries')).toBe(1)
    expect(count('admitted_keys')).toBe(1)
    // the tag index is copied; the catalog is the target's own (its triggers count the copied tags), the same
    expect(byTable.get('agent_tags')).toMatchObject({ maintained_by_target: false, source_rows: count('agent_tags'), copied: count('agent_tags'), target_rows: count('agent_tags') })
    expect(byTable.get('tag_counts')).toMatchObject({ maintained_by_target: true, source_rows: count('tag_counts'), target_rows: count('tag_counts'), missing: 0 })
    expect(report.skipped_tables.map((s: any) => s.table)).toContain('agents_fts')

    // one content per distinct bytes, however many records name it
    const contents = new Map([...seededBlobs().values()].map((b) => [sha256Hex(b), b.byteLength]))
    expect(contents.size).toBe(4)
    expect(report.blobs).toMatchObject({ copied_to: s3.url('cluster/'), contents: 4, copied: 4, already_present: 0, missing_in_source: 0 })
    expect(report.blobs.copied_bytes).toBe([...contents.values()].reduce((a, b) => a + b, 0))
    const bucket = s3StoreFromUrl(s3.url('cluster/'), s3.env, new FakeClock())
    for (const [hash, size] of contents) expect(await bucket.size(hash)).toBe(size)
  }, 60_000)

  test('a relay on the migrated database and bucket serves the same data', async () => {
    const clock = new FakeClock(seeded.now)
    const opened = await openPostgres(target, { logger: silentLogger, clock, lockWaitMs: 2000 })
    const blobStore = s3StoreFromUrl(s3.url('cluster/'), s3.env, clock)
    const dataDir = tempDir('relay-migrated-')
    let relay: Relay | undefined
    try {
      relay = createRelay(withOverrides({ dataDir, port: 0, logLevel: 'error', rateLimits: { sendPerMin: 0, pollPerMin: 0 }, webhooks: { allowPrivateTargets: true } }), {
        clock,
        logger: silentLogger,
        opened,
        blobStore,
      })
      const r = relay
      const as = (seed: string) => new RelayClient({ baseUrl: BASE_URL, keys: keyPairFromSeed(Buffer.from(seed, 'base64')), fetch: (req) => r.handle(req), now: () => clock.now() })
      const alice = as(seeded.keys.alice)
      const bob = as(seeded.keys.bob)
      const carol = as(seeded.keys.carol)

      // agents and their profiles, read back over HTTP and through the ports
      for (const c of [alice, bob, carol]) {
        const { last_active_at: _moved, ...profile } = await c.getAgent()
        const { last_active_at: _was, ...was } = seeded.before.profiles[c.publicKey]
        expect(profile).toEqual(was)
      }
      expect((await r.storage.agents.find(seeded.suspended))?.status).toBe('suspended')
      expect(await r.storage.admission.isAllowed(alice.publicKey)).toBe(true)
      expect(await r.storage.agents.count()).toBe(4)

      // discovery: by tag (copied index), by words (rebuilt), the catalog (counted by the target's triggers)
      const keys = (page: { agents: { public_key: string }[] }) => page.agents.map((a) => a.public_key).sort()
      expect(seeded.before.byTag).toHaveLength(2)
      expect(keys(await carol.discover({ tag: 'language' }))).toEqual(seeded.before.byTag)
      expect(keys(await carol.discover({ q: 'transl' }))).toEqual(seeded.before.byPrefix)
      expect(keys(await carol.discover({ q: 'french' }))).toEqual(seeded.before.byWord)
      expect(seeded.before.byWord).toEqual([alice.publicKey])
      expect(await carol.capabilities()).toEqual(seeded.before.catalog)

      // messages in every state, with their attachments
      for (const id of seeded.sent) expect((await r.storage.messages.find(id))?.status).toBe('sent')
      for (const id of seeded.delivered) expect((await r.storage.messages.find(id))?.status).toBe('delivered')
      for (const id of seeded.expired) expect((await alice.messageStatus(id)).status).toBe('expired')
      const inbox = await alice.poll({})
      expect(inbox.messages.map((m) => m.message_id).sort()).toEqual(seeded.sent.filter((id) => id !== seeded.toCarol).sort())
      const withFiles = await bob.getMessage(seeded.delivered[0])
      expect(withFiles.attachments).toHaveLength(2)
      expect((await bob.thread('thr-1')).messages).toHaveLength(2)

      // blob bytes from the bucket, through the relay
      const blobs = seededBlobs()
      for (const [blobId, bytes] of blobs) {
        const owner = (await r.storage.blobs.find(blobId))!.ownerKey === alice.publicKey ? alice : bob
        const res = await owner.downloadBlob(blobId)
        expect(new Uint8Array(await res.arrayBuffer())).toEqual(bytes)
      }
      // the recipient of an attachment may read it
      const attached = withFiles.attachments![0].blob_id
      expect(new Uint8Array(await (await bob.downloadBlob(attached)).arrayBuffer())).toEqual(blobs.get(attached)!)

      // ACLs, webhook and its pending delivery
      expect((await carol.acl.list()).map((e) => [e.peer_key, e.entry_type])).toEqual([[alice.publicKey, 'allow']])
      expect((await bob.acl.list()).map((e) => [e.peer_key, e.entry_type])).toEqual([[carol.publicKey, 'block']])
      expect((await carol.getWebhook()).url).toBe('http://127.0.0.1:9/hook')
      expect(await r.storage.webhooks.pendingCount()).toBe(1)
      // new rows get new ids: the copied ids moved the target's sequence on
      await carol.acl.put(bob.publicKey, 'block')
      expect((await carol.acl.list()).length).toBe(2)

      // the replay window came along: a signature the old relay accepted is a replay here
      const replayDb = new Database(join(seeded.dataDir, 'replay.db'), { readonly: true })
      const { signature, expires_at } = replayDb.query(`SELECT signature, expires_at FROM replay_log ORDER BY id DESC LIMIT 1`).get() as { signature: string; expires_at: number }
      replayDb.close()
      expect(await r.storage.replay.reserve(signature, expires_at)).toBeNull()
      // a message sent on the new storage arrives
      const sent = await bob.send({ recipient_key: alice.publicKey, body: { text: 'after the move' } })
      expect((await alice.getMessage(sent.message_id)).body).toEqual({ text: 'after the move' })
    } finally {
      if (relay) await relay.stop()
      else await opened.storage.close()
      rmSync(dataDir, { recursive: true, force: true })
    }
  }, 60_000)

  test('a second run copies nothing new and verifies again', async () => {
    const before = await rowCounts(target)
    const run = await relayMigrate(['--to', target, '--blobs', s3.url('cluster/'), '--data-dir', seeded.dataDir], s3.env)
    expect({ code: run.code, errors: run.stderr.split('\n').filter((l) => l.startsWith('relay: error')) }).toEqual({ code: 0, errors: [] })
    expect(run.stdout).toMatch(/^rows: \d+ in the source, 0 copied, \d+ already there$/m)
    expect(run.stdout).toMatch(/: 0 copied \(0 B, SHA-256 checked\), 4 already there$/m)
    expect(run.stdout).toContain('verified: every source row is in the target, every blob content is in the bucket')
    // the relay above wrote more since; the second run left every row as it was
    expect(await rowCounts(target)).toEqual(before)
  }, 60_000)

  test('without --blobs only the records move, and the output says where the bytes stay', async () => {
    const db = await pg.createDatabase('records_only')
    const run = await relayMigrate(['--to', db, '--data-dir', seeded.dataDir])
    expect(run.code).toBe(0)
    expect(run.stdout).toContain(`blobs: bytes not copied (no --blobs): 4 contents (298 KiB) stay in ${join(seeded.dataDir, 'blobs')}`)
    expect(run.stdout).toContain('verified: every source row is in the target\n')
  }, 60_000)

  test('a run killed mid-copy leaves a mark: relays refuse the database until a second run finishes it', async () => {
    const db = await pg.createDatabase('interrupted')
    // one row per statement, so the copy is still under way when it is killed
    const proc = spawn([process.execPath, MAIN, 'migrate', '--to', db, '--data-dir', seeded.dataDir, '--batch', '1'], {
      cwd: work,
      env: { PATH: process.env.PATH ?? '' },
      stdin: 'ignore',
      stdout: 'ignore',
      stderr: 'pipe',
    })
    const reader = proc.stderr.getReader()
    let err = ''
    while (!err.includes('migrate: copying')) {
      const { done, value } = await reader.read()
      if (done) break
      err += new TextDecoder().decode(value)
    }
    proc.kill('SIGKILL')
    await proc.exited
    expect(err).toContain('migrate: copying')
    // an instance on it stops at start with one line naming the fix
    const refused = await openPostgres(db, { logger: silentLogger, clock: new FakeClock(), lockWaitMs: 1000 }).then(
      async (o) => {
        await o.storage.close()
        return 'started'
      },
      (e: Error) => e.message,
    )
    expect(refused).toMatch(/holds an unfinished `relay migrate` \(started .* from .*relay\.db\): run `relay migrate --to …` again with the same source to finish it/)
    // the second run finishes the copy and removes the mark; instances start
    const again = await relayMigrate(['--to', db, '--data-dir', seeded.dataDir])
    expect({ code: again.code, errors: again.stderr.split('\n').filter((l) => l.startsWith('relay: error')) }).toEqual({ code: 0, errors: [] })
    expect(again.stdout).toContain('verified: every source row is in the target')
    const opened = await openPostgres(db, { logger: silentLogger, clock: new FakeClock(), lockWaitMs: 1000 })
    await opened.storage.close()
  }, 60_000)

  test('what the target refuses, or bytes that do not match their address, exit 1 naming them', async () => {
    const copy = join(work, 'damaged')
    cpSync(seeded.dataDir, copy, { recursive: true })
    // a link to a message that does not exist (SQLite enforces foreign keys per connection; PostgreSQL always)
    const db = new Database(join(copy, 'relay.db'))
    db.run(`INSERT INTO message_blobs (message_id, blob_id, expires_at) VALUES ('msg_gone', 'blob_x', 1)`)
    const { hash, size_bytes } = db.query(`SELECT hash, size_bytes FROM blobs WHERE size_bytes = 5000`).get() as { hash: string; size_bytes: number }
    db.close()
    // same size, other bytes: only the hash can tell
    writeFileSync(join(copy, 'blobs', hash.slice(0, 2), hash.slice(2, 4), hash), Buffer.alloc(size_bytes, 7))

    // a content the records name whose file is gone, and a file no record names
    const gone = readSource((db) => (db.query(`SELECT hash FROM blobs WHERE size_bytes = 1`).get() as { hash: string }).hash, copy)
    rmSync(join(copy, 'blobs', gone.slice(0, 2), gone.slice(2, 4), gone))
    const stray = sha256Hex(Buffer.from('stray'))
    mkdirSync(join(copy, 'blobs', stray.slice(0, 2), stray.slice(2, 4)), { recursive: true })
    writeFileSync(join(copy, 'blobs', stray.slice(0, 2), stray.slice(2, 4), stray), 'stray')

    // small batches: the refused row shares its batch with good ones, which still arrive
    const db2 = await pg.createDatabase('damaged')
    const run = await relayMigrate(['--to', db2, '--blobs', s3.url('damaged/'), '--data-dir', copy, '--batch', '2'], s3.env)
    expect(run.code).toBe(1)
    expect((await rowCounts(db2)).message_blobs).toBe(3)
    expect((await rowCounts(db2)).messages).toBe(5)
    expect(run.stdout).toContain('MISMATCH message_blobs: 1 row(s) refused by the target (insert or update on table "message_blobs" violates foreign key constraint')
    expect(run.stdout).toContain(`MISMATCH blob ${hash}: the bytes read hash to ${sha256Hex(Buffer.alloc(size_bytes, 7))} (5000 bytes); not copied`)
    expect(run.stdout).toContain(`warning: 1 content(s) named by blob records are not in the source blob store (e.g. ${gone}); those blobs were already unreadable`)
    expect(run.stdout).toContain('note: 1 file(s) in the source blob store that no record names were left behind')
    expect(await s3StoreFromUrl(s3.url('damaged/'), s3.env, new FakeClock()).size(stray)).toBeNull()
    expect(run.stderr).toMatch(/^relay: error: the target is missing what the source holds: message_blobs: 1 row\(s\) refused by the target .*\(and 1 more\)$/m)
    // the bad bytes never reached the bucket under that address
    expect(await s3StoreFromUrl(s3.url('damaged/'), s3.env, new FakeClock()).size(hash)).toBeNull()
  }, 60_000)

  test('an unreachable database fails with one line that does not show the password', async () => {
    const run = await relayMigrate(['--to', 'postgres://relay:s3cret@127.0.0.1:1/relay', '--data-dir', seeded.dataDir])
    expect(run.code).toBe(1)
    expect(run.stdout).toBe('')
    const lines = run.stderr.trimEnd().split('\n')
    expect(lines.at(-1)).toMatch(/^relay: error: database postgres:\/\/relay@127\.0\.0\.1:1\/relay is unreachable: /)
    expect(lines.filter((l) => l.startsWith('relay: error:'))).toHaveLength(1)
    expect(run.stderr).not.toContain('s3cret')
  })

  test('an unreachable bucket fails with one line naming it, before the database is touched', async () => {
    const db = await pg.createDatabase('no_bucket')
    const run = await relayMigrate(['--to', db, '--blobs', 's3://relay-test/x/', '--data-dir', seeded.dataDir], { ...s3.env, AWS_ENDPOINT_URL_S3: 'http://127.0.0.1:1' })
    expect(run.code).toBe(1)
    expect(run.stdout).toBe('')
    expect(run.stderr.trimEnd().split('\n')).toEqual([expect.stringMatching(/^relay: error: .*s3:\/\/relay-test\/x\/.*127\.0\.0\.1:1/)])
    expect(await rowCounts(db).catch((err) => String(err))).toMatch(/relation "agents" does not exist/)
  })

  test('a database of another relay version is refused before anything is written', async () => {
    const older = join(work, 'older')
    cpSync(seeded.dataDir, older, { recursive: true })
    const db = new Database(join(older, 'relay.db'))
    db.run(`DELETE FROM __drizzle_migrations WHERE created_at = (SELECT max(created_at) FROM __drizzle_migrations)`)
    db.close()
    const fresh = await pg.createDatabase('older')
    const run = await relayMigrate(['--to', fresh, '--data-dir', older])
    expect({ code: run.code, stdout: run.stdout, stderr: run.stderr }).toEqual({
      code: 1,
      stdout: '',
      stderr: 'relay: error: the relay database was written by an older relay: start this version on it once (it upgrades the database), stop it, then migrate\n',
    })
    expect(await rowCounts(fresh).catch((err) => String(err))).toMatch(/relation "agents" does not exist/)
  })

  test('a target whose schema lacks a column of the source is refused before any row is written', async () => {
    const db = await pg.createDatabase('narrow')
    const opened = await openPostgres(db, { logger: silentLogger, clock: new FakeClock(), lockWaitMs: 2000, tool: true })
    await opened.storage.close()
    const sql = new SQL({ url: db, max: 1 })
    await sql.unsafe('ALTER TABLE messages DROP COLUMN metadata')
    await sql.close()
    const run = await relayMigrate(['--to', db, '--data-dir', seeded.dataDir])
    expect(run.code).toBe(1)
    expect(run.stdout).toBe('')
    expect(run.stderr).toContain("relay: error: the target schema does not match this relay's: column messages.metadata is missing in the target")
    expect((await rowCounts(db)).agents).toBe(0)
  })

  test('usage: --to is required and must name PostgreSQL; --blobs must name a bucket', async () => {
    for (const [args, message] of [
      [['--data-dir', seeded.dataDir], 'migrate needs --to postgres://user:password@host:5432/database'],
      [['--to', 'mysql://x/y'], '--to must be a postgres:// URL'],
      [['--to', target, '--blobs', '/var/blobs'], '--blobs must be an s3://bucket/prefix URL'],
    ] as const) {
      const run = await relayMigrate([...args])
      expect({ code: run.code, stderr: run.stderr.split('\n')[0] }).toEqual({ code: 2, stderr: `relay: error: ${message}` })
    }
  })
})

async function rowCounts(url: string): Promise<Record<string, number>> {
  const sql = new SQL({ url, max: 1 })
  try {
    const out: Record<string, number> = {}
    for (const table of ['agents', 'messages', 'message_blobs', 'acl_entries', 'blobs', 'blob_contents', 'webhooks', 'webhook_deliveries', 'replay_log', 'relay_state', 'admitted_keys']) {
      const [{ n }] = await sql.unsafe(`SELECT count(*)::int AS n FROM ${table}`)
      out[table] = n
    }
    return out
  } finally {
    await sql.close()
  }
}
