/**
 * A SQLite relay with something of everything in it, built through the relay's own HTTP API: agents
 * with profiles and tags (one suspended), messages sent, delivered and expired, attachments, ACL entries,
 * a webhook with a pending delivery, the admission allowlist, and the replay window of every request.
 */
import { randomBytes } from 'node:crypto'
import type { AgentJson, RelayClient } from '../../src/client/index.ts'
import { startTestRelay, type TestRelay } from '../support/harness.ts'

export interface SeededRelay {
  t: TestRelay
  alice: RelayClient
  bob: RelayClient
  carol: RelayClient
  /** Message ids by status. */
  sent: string[]
  delivered: string[]
  expired: string[]
  /** Blob ids and the bytes of each. */
  blobs: Map<string, Uint8Array<ArrayBuffer>>
  suspended: string
  /** The message alice sent to carol while carol's webhook was set. */
  toCarol: string
  /** What the relay answered before the move, to compare with the moved one. */
  before: {
    profiles: Map<string, AgentJson>
    /** Keys found by a tag, by a word prefix, by a whole word. */
    byTag: string[]
    byPrefix: string[]
    byWord: string[]
    catalog: { tag: string; agent_count: number }[]
  }
}

export async function seedRelay(dataDir?: string): Promise<SeededRelay> {
  const t = await startTestRelay(
    { rateLimits: { sendPerMin: 0, pollPerMin: 0 }, webhooks: { allowPrivateTargets: true } },
    dataDir ? { dataDir } : {},
  )
  const alice = t.client()
  const bob = t.client()
  const carol = t.client()
  await alice.updateProfile({ display_name: 'Alice Translator', visibility: 'public', capabilities: [{ name: 'translate', description: 'French to English', tags: ['language', 'fr'] }], metadata: { team: 'a' } })
  await bob.updateProfile({ display_name: 'Bob', visibility: 'public', capabilities: [{ name: 'summarize', tags: ['text'] }, { name: 'translate', tags: ['language'] }] })
  // U+0000 is text SQLite keeps as is and PostgreSQL cannot: the stores escape it
  await carol.updateProfile({ display_name: 'Carol\u0000 \uFDD0 Nul', inbox_policy: 'allowlist' })

  const blobs = new Map<string, Uint8Array<ArrayBuffer>>()
  for (const size of [0, 1, 5000, 300_000]) {
    const bytes = new Uint8Array(randomBytes(size))
    const b = await alice.uploadBlob(bytes, { contentType: 'application/octet-stream' })
    blobs.set(b.blob_id, bytes)
  }
  // the same bytes twice: two records, one content
  const again = await bob.uploadBlob(blobs.values().next().value!, { contentType: 'text/plain' })
  blobs.set(again.blob_id, blobs.values().next().value!)
  const ids = [...blobs.keys()]

  const sent: string[] = []
  const delivered: string[] = []
  const expired: string[] = []
  const m1 = await alice.send({ recipient_key: bob.publicKey, body: { text: 'héllo ✓', n: 1.5 }, thread_id: 'thr-1', attachments: [{ blob_id: ids[2] }, { blob_id: ids[3] }] })
  const m2 = await bob.send({ recipient_key: alice.publicKey, body: { text: 'reply' }, thread_id: 'thr-1', in_reply_to: m1.message_id, metadata: { k: 'v' } })
  // delivered, then expired: the sweep removes it
  await alice.send({ recipient_key: bob.publicKey, body: { text: 'short' }, expires_in: 60 })
  // bob reads his inbox: m1 and the short one are delivered
  await bob.poll({})
  delivered.push(m1.message_id)
  const m3 = await alice.send({ recipient_key: bob.publicKey, body: { text: 'later' }, expires_in: 60 })
  t.clock.advance(61_000)
  await t.relay.scheduler.runNow('expire-messages')
  expired.push(m3.message_id)
  sent.push(m2.message_id)
  sent.push((await bob.send({ recipient_key: alice.publicKey, content_type: 'text/plain', body: 'plain text' })).message_id)

  // ACLs
  await carol.acl.put(alice.publicKey, 'allow')
  await bob.acl.put(carol.publicKey, 'block')
  await alice.acl.put(carol.publicKey, 'allow')

  // a webhook and a message it has not delivered yet (no jobs run here)
  await carol.setWebhook('http://127.0.0.1:9/hook', randomBytes(32).toString('base64url'))
  const toCarol = (await alice.send({ recipient_key: carol.publicKey, body: { text: 'to the hook' }, attachments: [{ blob_id: ids[0] }] })).message_id
  sent.push(toCarol)

  // operator actions
  await t.relay.admission.allow(alice.publicKey, 'first')
  const suspended = t.client().publicKey
  await t.relay.storage.agents.suspend(suspended, 'spam', t.clock.now())
  const keys = (page: { agents: { public_key: string }[] }) => page.agents.map((a) => a.public_key).sort()
  const before = {
    profiles: new Map(await Promise.all([alice, bob, carol].map(async (c) => [c.publicKey, await c.getAgent()] as const))),
    byTag: keys(await carol.discover({ tag: 'language' })),
    byPrefix: keys(await carol.discover({ q: 'transl' })),
    byWord: keys(await carol.discover({ q: 'french' })),
    catalog: await carol.capabilities(),
  }
  return { t, alice, bob, carol, sent, delivered, expired, blobs, suspended, toCarol, before }
}

/** What a seeding process reports, in JSON: enough to act as the same agents on the moved relay. */
export interface SeedReport {
  /** The fake clock's time when seeding ended. */
  now: number
  dataDir: string
  /** Ed25519 seeds, base64. */
  keys: { alice: string; bob: string; carol: string }
  sent: string[]
  delivered: string[]
  expired: string[]
  toCarol: string
  suspended: string
  /** Blob id → bytes, base64. */
  blobs: Record<string, string>
  before: { profiles: Record<string, AgentJson>; byTag: string[]; byPrefix: string[]; byWord: string[]; catalog: { tag: string; agent_count: number }[] }
}

/**
 * `bun test/storage/migrate-seed.ts DIR`: seeds a relay on DIR, prints one line of SeedReport, and keeps
 * the relay open — its database held as a running relay holds it — until stdin closes.
 */
if (import.meta.main) {
  const s = await seedRelay(process.argv[2])
  const seedOf = (c: RelayClient) => Buffer.from(c.transport.keys.seed).toString('base64')
  const report: SeedReport = {
    now: s.t.clock.now(),
    dataDir: s.t.dataDir,
    keys: { alice: seedOf(s.alice), bob: seedOf(s.bob), carol: seedOf(s.carol) },
    sent: s.sent,
    delivered: s.delivered,
    expired: s.expired,
    toCarol: s.toCarol,
    suspended: s.suspended,
    blobs: Object.fromEntries([...s.blobs].map(([id, bytes]) => [id, Buffer.from(bytes).toString('base64')])),
    before: { ...s.before, profiles: Object.fromEntries(s.before.profiles) },
  }
  process.stdout.write(JSON.stringify(report) + '\n')
  for await (const _ of process.stdin) {
    // held open until the test closes stdin
  }
  await s.t.relay.stop()
  process.exit(0)
}
