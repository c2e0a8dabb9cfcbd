/**
 * What a 201 promises, proven against the compiled binary with fsync and fdatasync wrapped by a small
 * LD_PRELOAD library (built here with gcc from fixtures/sync-shim.c) that makes every sync take 200 ms
 * and records when it started, when it returned and how large the file was when it started.
 *
 * RELAY_DURABILITY=fsync: for every 201, the message's first frame in relay.db-wal and its signature's
 * first frame in replay.db-wal were both covered by a sync (the file was already larger than that
 * frame's offset when the sync started, and not yet when the request was sent) that returned before
 * the answer reached the client.
 * RELAY_DURABILITY=process: no WAL is synced while the answers are given (as the README says: the
 * commit is in the operating system's cache, not on disk). Both: every 201 survives kill -9.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { RelayClient } from '../../src/client/index.ts'
import { requireProgram } from '../support/requires.ts'
import { startBinary, tempDataDir } from './binary.ts'

const DELAY_MS = 200
const gcc = Bun.which('gcc')
const canRun = requireProgram('gcc', gcc, 'durability proof (LD_PRELOAD fsync shim)')
const work = tempDataDir()
const shim = join(work, 'sync-shim.so')
afterAll(() => rmSync(work, { recursive: true, force: true }))

beforeAll(async () => {
  if (!canRun) return
  const proc = Bun.spawn([gcc!, '-shared', '-fPIC', '-O2', '-o', shim, join(import.meta.dir, 'fixtures', 'sync-shim.c'), '-ldl'], { stderr: 'pipe' })
  if ((await proc.exited) !== 0) throw new Error(`gcc failed: ${await new Response(proc.stderr).text()}`)
})

/** Wall-clock microseconds, comparable with the shim's CLOCK_REALTIME stamps. */
const nowUs = () => Math.round((performance.timeOrigin + performance.now()) * 1000)

interface Sync {
  start: number
  end: number
  size: number
  path: string
}

interface Ack {
  sent: number
  answered: number
  messageId: string
  signatureId: string
}

async function run(durability: 'fsync' | 'process') {
  const dataDir = join(work, durability)
  mkdirSync(dataDir)
  const log = join(work, `${durability}.log`)
  const arm = join(work, `${durability}.armed`)
  const env = {
    RELAY_DURABILITY: durability,
    RELAY_RATE_SEND_PER_MIN: '0',
    RELAY_RATE_POLL_PER_MIN: '0',
    RELAY_RATE_REQUESTS_PER_MIN: '0',
    LD_PRELOAD: shim,
    SYNC_LOG: log,
    SYNC_ARM: arm,
    SYNC_DELAY_MS: String(DELAY_MS),
  }
  const relay = await startBinary(dataDir, env)
  const senderKeys = generateKeyPair()
  const recipientKeys = generateKeyPair()
  let current: { signatureId: string } = { signatureId: '' }
  const sender = (slot: { signatureId: string }) =>
    new RelayClient({
      baseUrl: relay.url,
      keys: senderKeys,
      fetch: ((req: Request) => {
        slot.signatureId = (req.headers.get('x-m2m-signature') ?? '').slice(0, 22)
        return fetch(req)
      }) as typeof fetch,
    })
  // agents exist before the syncs slow down
  await new RelayClient({ baseUrl: relay.url, keys: recipientKeys }).getAgent()
  await sender(current).send({ recipient_key: recipientKeys.publicKey, body: 'warm-up' })
  writeFileSync(arm, '')
  const armedAt = nowUs()
  const acks: Ack[] = []
  for (let wave = 0; wave < 3; wave++) {
    await Promise.all(
      Array.from({ length: 8 }, async (_, i) => {
        const slot = { signatureId: '' }
        const sent = nowUs()
        const res = await sender(slot).send({ recipient_key: recipientKeys.publicKey, body: { wave, i } })
        acks.push({ sent, answered: nowUs(), messageId: res.message_id, signatureId: slot.signatureId })
      }),
    )
  }
  const doneAt = nowUs()
  await relay.crash() // kill -9: the WALs stay as they were, nothing checkpointed
  const wal = readFileSync(join(dataDir, 'relay.db-wal'))
  const replayWal = readFileSync(join(dataDir, 'replay.db-wal'))
  const syncs: Sync[] = readFileSync(log, 'utf8')
    .trim()
    .split('\n')
    .map((line) => line.split(' '))
    .map(([, start, end, size, path]) => ({ start: Number(start), end: Number(end), size: Number(size), path }))
  rmSync(arm, { force: true })

  // every 201 survives the crash
  const after = await startBinary(dataDir, { RELAY_DURABILITY: durability })
  const inbox = new RelayClient({ baseUrl: after.url, keys: recipientKeys })
  const found = new Set<string>()
  for await (const page of inbox.pollPages({ limit: 100 })) for (const m of page.messages) found.add(m.message_id)
  await after.stop()
  expect(acks.filter((a) => !found.has(a.messageId))).toEqual([])
  return { acks, wal, replayWal, syncs, armedAt, doneAt }
}

/** A sync of `file` that started once the frame at `offset` was written (and not before `sent`) and returned by `answered`. */
function covering(syncs: Sync[], file: string, offset: number, ack: Ack): Sync | undefined {
  const ofFile = syncs.filter((s) => s.path.endsWith(`/${file}`))
  // the frame was not yet in the file when the request was sent: the last sync before it saw a shorter file
  const before = ofFile.filter((s) => s.start <= ack.sent).at(-1)
  if (!before || before.size > offset) return undefined
  return ofFile.find((s) => s.size > offset && s.end <= ack.answered)
}

describe.if(canRun)('durability, with every fsync slowed to 200 ms and recorded', () => {
  test('fsync: no 201 reaches the client before the syncs covering its commits have returned', async () => {
    const { acks, wal, replayWal, syncs } = await run('fsync')
    expect(acks.length).toBe(24)
    for (const ack of acks) {
      const messageAt = wal.indexOf(ack.messageId)
      const signatureAt = replayWal.indexOf(ack.signatureId)
      expect(messageAt).toBeGreaterThan(0)
      expect(signatureAt).toBeGreaterThan(0)
      expect({ id: ack.messageId, relayDb: covering(syncs, 'relay.db-wal', messageAt, ack) !== undefined }).toEqual({ id: ack.messageId, relayDb: true })
      expect({ id: ack.messageId, replayDb: covering(syncs, 'replay.db-wal', signatureAt, ack) !== undefined }).toEqual({ id: ack.messageId, replayDb: true })
      // and so no answer came sooner than one slowed sync
      expect(ack.answered - ack.sent).toBeGreaterThanOrEqual(DELAY_MS * 1000)
    }
  }, 90_000)

  test('process: no WAL is synced while the 201s are given; they still survive kill -9', async () => {
    const { acks, syncs, armedAt, doneAt } = await run('process')
    expect(acks.length).toBe(24)
    const walSyncs = syncs.filter((s) => s.start >= armedAt && s.start <= doneAt && /\/(relay|replay)\.db-wal$/.test(s.path))
    expect(walSyncs).toEqual([])
    // the shim did see this process's syncs (start-up), so an empty list is not a blind spot
    expect(syncs.length).toBeGreaterThan(0)
  }, 90_000)
})
