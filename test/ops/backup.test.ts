/**
 * `relay backup` while the relay serves and a writer keeps committing: the copy is consistent, restores
 * into a new data directory, and a relay started on it serves the data back.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { Database } from 'bun:sqlite'
import { spawn, spawnSync } from 'bun'
import { copyFileSync, cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { RelayClient } from '../../src/client/index.ts'
import { tempDir } from '../support/harness.ts'
import { buildBinary, startBinary, type RunningBinary } from '../support/binary.ts'

let dir: string
let bin: string
beforeAll(async () => {
  bin = await buildBinary()
  dir = tempDir('relay-backup-')
})
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const BODY = JSON.stringify({ text: 'x'.repeat(1000) })

function insertPair(db: Database, n: number, sender: string, recipient: string, now: number) {
  // two rows per transaction: a consistent copy holds both or neither
  db.transaction(() => {
    for (const side of ['a', 'b']) {
      db.run(
        `INSERT INTO messages (message_id, sender_key, recipient_key, content_type, body, status, created_at, expires_at)
         VALUES (?, ?, ?, 'application/json', ?, 'sent', ?, ?)`,
        [`msg_${Math.floor(now / 1000)}_${n.toString(16).padStart(11, '0')}${side}`, sender, recipient, BODY, now, now + 86_400_000],
      )
    }
  })()
}

describe('relay backup', () => {
  let relay: RunningBinary
  const dataDir = () => join(dir, 'data')

  test('copies the database while the relay serves and writes continue, and the copy restores', async () => {
    relay = await startBinary({ cwd: dir, dataDir: dataDir() })
    const agents = Array.from({ length: 3 }, () => new RelayClient({ baseUrl: relay.url, keys: generateKeyPair() }))
    const confirmed = agents.map(() => 0)
    const written = agents.map(() => 0)
    for (const [i, c] of agents.entries()) await c.updateProfile({ display_name: `agent-${i}-v0`, visibility: 'public' })

    // some bulk so the copy takes a moment, then a writer that never pauses
    const db = new Database(join(dataDir(), 'relay.db'))
    db.run('PRAGMA busy_timeout = 5000')
    const now = Date.now()
    db.transaction(() => {
      for (let n = 0; n < 2500; n++) insertPair(db, n, agents[0].publicKey, agents[1].publicKey, now)
    })()
    let pairs = 2500
    let writing = true
    const writer = (async () => {
      while (writing) {
        insertPair(db, pairs, agents[0].publicKey, agents[1].publicKey, now)
        pairs++
        await Promise.all(
          agents.map(async (c, i) => {
            const v = ++written[i]
            await c.updateProfile({ display_name: `agent-${i}-v${v}` })
            confirmed[i] = Math.max(confirmed[i], v)
          }),
        )
      }
    })()
    await Bun.sleep(50)

    const before = { pairs, confirmed: [...confirmed] }
    const file = join(dir, 'backups', 'relay-backup.db')
    mkdirSync(join(dir, 'backups'))
    const proc = spawn([bin, 'backup', file, '--data-dir', dataDir(), '--json'], { cwd: dir, stdout: 'pipe', stderr: 'pipe' })
    const [code, out, err] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()])
    const after = { pairs }
    await Bun.sleep(50)
    writing = false
    await writer
    db.close()
    expect(err).toBe('')
    expect(code).toBe(0)
    expect(after.pairs).toBeGreaterThan(before.pairs) // the writer kept committing during the copy

    const summary = JSON.parse(out)
    expect(summary.file).toBe(file)
    expect(summary.agents).toBe(3)
    expect(summary.blob_dir).toBe(join(dataDir(), 'blobs'))
    const copy = new Database(file, { readonly: true })
    const ids = copy.query<{ message_id: string }, []>('SELECT message_id FROM messages').all().map((r) => r.message_id)
    copy.close()
    expect(summary.messages).toBe(ids.length)
    expect(ids.length % 2).toBe(0) // never half a transaction
    expect(ids.length / 2).toBeGreaterThanOrEqual(before.pairs)
    expect(ids.length / 2).toBeLessThanOrEqual(after.pairs)
    expect(existsSync(`${file}.partial-${proc.pid}`)).toBe(false)

    // restore: database file plus the blob directory into a fresh data dir, then start on it
    const restored = join(dir, 'restored')
    mkdirSync(restored)
    copyFileSync(file, join(restored, 'relay.db'))
    cpSync(join(dataDir(), 'blobs'), join(restored, 'blobs'), { recursive: true })
    const second = await startBinary({ cwd: dir, dataDir: restored })
    try {
      const reader = new RelayClient({ baseUrl: second.url, keys: generateKeyPair() })
      for (const [i, c] of agents.entries()) {
        const profile = await reader.getAgent(c.publicKey)
        const version = Number(/^agent-\d-v(\d+)$/.exec(profile.display_name ?? '')?.[1])
        expect(version).toBeGreaterThanOrEqual(before.confirmed[i])
        expect(version).toBeLessThanOrEqual(written[i])
        expect(profile.visibility).toBe('public')
      }
      const stats = spawnSync([bin, 'admin', 'stats', '--json', '--data-dir', restored], { cwd: dir })
      expect(stats.exitCode).toBe(0)
      const s = JSON.parse(stats.stdout.toString())
      expect(s.messages.sent).toBe(ids.length)
      expect(s.agents.active).toBeGreaterThanOrEqual(3)
    } finally {
      second.proc.kill('SIGTERM')
      await second.proc.exited
    }
  })

  test('never overwrites an existing file', () => {
    const file = join(dir, 'exists.db')
    writeFileSync(file, 'precious')
    const r = spawnSync([bin, 'backup', file, '--data-dir', dataDir()], { cwd: dir })
    expect(r.exitCode).toBe(1)
    expect(r.stderr.toString()).toContain('already exists; not overwriting it')
    expect(readFileSync(file, 'utf8')).toBe('precious')
  })

  test('prints what it wrote, and refuses a data directory without a database', () => {
    const file = join(dir, 'plain.db')
    const r = spawnSync([bin, 'backup', file, '--data-dir', dataDir()], { cwd: dir })
    expect(r.exitCode).toBe(0)
    expect(r.stdout.toString()).toMatch(/^wrote .*plain\.db \(.*3 agents, \d+ messages, 0 blob records\)\n/)
    expect(r.stdout.toString()).toContain(join(dataDir(), 'blobs'))
    expect((Bun.file(file).size)).toBeGreaterThan(0)
    const missing = spawnSync([bin, 'backup', join(dir, 'x.db'), '--data-dir', join(dir, 'nowhere')], { cwd: dir })
    expect(missing.exitCode).toBe(1)
    expect(missing.stderr.toString()).toContain('no relay database at')
    expect(existsSync(join(dir, 'nowhere'))).toBe(false)
    expect(existsSync(join(dir, 'x.db'))).toBe(false)
    expect(spawnSync([bin, 'backup'], { cwd: dir }).exitCode).toBe(2)
    const help = spawnSync([bin, 'backup', '--help'], { cwd: dir })
    expect(help.exitCode).toBe(0)
    expect(help.stdout.toString()).toStartWith('relay backup FILE')
    expect(help.stdout.toString()).toContain('never overwritten')
  })

  afterAll(async () => {
    relay?.proc.kill('SIGTERM')
    await relay?.proc.exited
  })
})
