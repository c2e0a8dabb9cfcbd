/**
 * Crash rounds against the compiled binary: concurrent signed sends (to polled recipients and to
 * recipients with a webhook), blob uploads, and the webhook deliveries they cause, cut by `kill -9` at a
 * random moment, several times over one data directory. Then every promise the relay made is checked:
 * each message answered 201 can be read by its sender, each blob answered 201/200 downloads with the
 * bytes uploaded, and each accepted message for a webhook recipient reaches the receiver (at least once,
 * with one delivery id per message). Used by the short test in `npm test` and by bench/crash.ts.
 */
import { createHash, randomBytes } from 'node:crypto'
import { generateKeyPair } from '../../src/auth/sign.ts'
import { RelayClient, type KeyPair } from '../../src/client/index.ts'
import { WebhookReceiver } from '../support/webhook-receiver.ts'
import { startBinary, type RunningRelay } from './binary.ts'

export interface CrashLoadOptions {
  dataDir: string
  rounds: number
  /** Each round lasts a random time in this range (ms) before the kill. */
  roundMs: [number, number]
  senders: number
  uploaders: number
  /** Largest blob uploaded (bytes); sizes are random up to it. */
  blobMaxBytes: number
  /** How long the final check waits for webhook deliveries to catch up (ms). */
  deliveryWaitMs: number
  log?: (line: string) => void
}

export interface CrashReport {
  rounds: number
  messages: number
  blobs: number
  hookedMessages: number
  missingMessages: string[]
  badBlobs: string[]
  undelivered: string[]
  /** Deliveries received more than once (allowed: at least once), and ids that changed between attempts (not allowed). */
  repeatedDeliveries: number
  changedDeliveryIds: string[]
  elapsedMs: number
}

export const CRASH_ENV = {
  RELAY_RATE_SEND_PER_MIN: '0',
  RELAY_RATE_POLL_PER_MIN: '0',
  RELAY_RATE_ADDRESS_PER_MIN: '0',
  // the check reads every message back, thousands per agent
  RELAY_RATE_REQUESTS_PER_MIN: '0',
  RELAY_WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
  RELAY_WEBHOOK_RETRY_DELAYS: '1s,1s,2s,2s,5s,5s',
  // long runs upload more than the default 1 GiB per agent
  RELAY_BLOB_QUOTA: '64GiB',
}

const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex')
const pick = <T>(list: T[]) => list[Math.floor(Math.random() * list.length)]

async function inParallel<T>(items: T[], workers: number, step: (item: T) => Promise<void>): Promise<void> {
  let next = 0
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (next < items.length) await step(items[next++])
    }),
  )
}

export async function crashRounds(opts: CrashLoadOptions): Promise<CrashReport> {
  const t0 = performance.now()
  const log = opts.log ?? (() => {})
  const rx = WebhookReceiver.start()
  const senders = Array.from({ length: 4 }, () => generateKeyPair())
  const polled = Array.from({ length: 3 }, () => generateKeyPair())
  const hooked = Array.from({ length: 3 }, () => generateKeyPair())
  const uploaders = Array.from({ length: Math.max(1, opts.uploaders) }, () => generateKeyPair())
  const messages: { id: string; sender: KeyPair; hooked: boolean }[] = []
  const blobs: { id: string; owner: KeyPair; hash: string }[] = []
  let running: RunningRelay | undefined
  const client = (keys: KeyPair) => new RelayClient({ baseUrl: (running as RunningRelay).url, keys })

  try {
    running = await startBinary(opts.dataDir, CRASH_ENV)
    for (const keys of hooked) await client(keys).setWebhook(rx.url, randomBytes(32).toString('base64url'))

    for (let round = 1; round <= opts.rounds; round++) {
      if (!running) running = await startBinary(opts.dataDir, CRASH_ENV)
      let stop = false
      const before = { messages: messages.length, blobs: blobs.length }
      const sending = Array.from({ length: opts.senders }, async (_, w) => {
        const me = client(senders[w % senders.length])
        for (let i = 0; !stop; i++) {
          const toHook = i % 2 === 0
          const to = pick(toHook ? hooked : polled)
          try {
            const res = await me.send({ recipient_key: to.publicKey, body: { round, w, i, pad: 'x'.repeat(i % 200) } })
            messages.push({ id: res.message_id, sender: me.transport.keys, hooked: toHook })
          } catch {
            if (stop) return
            await Bun.sleep(5)
          }
        }
      })
      const uploading = Array.from({ length: opts.uploaders }, async (_, w) => {
        const owner = uploaders[w % uploaders.length]
        const me = client(owner)
        while (!stop) {
          const bytes = randomBytes(1 + Math.floor(Math.random() * opts.blobMaxBytes))
          try {
            const blob = await me.uploadBlob(new Uint8Array(bytes))
            blobs.push({ id: blob.blob_id, owner, hash: sha256(bytes) })
          } catch {
            if (stop) return
            await Bun.sleep(5)
          }
        }
      })
      const [lo, hi] = opts.roundMs
      await Bun.sleep(lo + Math.random() * (hi - lo))
      await running.crash()
      stop = true
      running = undefined
      await Promise.all([...sending, ...uploading])
      log(`round ${round}: killed with -9 after ${messages.length - before.messages} messages and ${blobs.length - before.blobs} blobs acknowledged`)
    }

    // the check, on a last restart
    running = await startBinary(opts.dataDir, CRASH_ENV)
    const missingMessages: string[] = []
    const readers = new Map<KeyPair, RelayClient>()
    const reader = (keys: KeyPair) => readers.get(keys) ?? (readers.set(keys, client(keys)), readers.get(keys) as RelayClient)
    await inParallel(messages, 16, async (m) => {
      try {
        await reader(m.sender).getMessage(m.id)
      } catch {
        missingMessages.push(m.id)
      }
    })
    const badBlobs: string[] = []
    await inParallel(blobs, 8, async (b) => {
      try {
        const res = await reader(b.owner).downloadBlob(b.id)
        if (sha256(new Uint8Array(await res.arrayBuffer())) !== b.hash) badBlobs.push(b.id)
      } catch {
        badBlobs.push(b.id)
      }
    })
    const expected = new Set(messages.filter((m) => m.hooked).map((m) => m.id))
    const deliveredIds = () => new Set(rx.received.map((r) => r.json?.message?.message_id as string))
    const deadline = Date.now() + opts.deliveryWaitMs
    for (let got = deliveredIds(); [...expected].some((id) => !got.has(id)) && Date.now() < deadline; got = deliveredIds()) await Bun.sleep(100)
    const got = deliveredIds()
    const undelivered = [...expected].filter((id) => !got.has(id))
    const idsByMessage = new Map<string, Set<string>>()
    for (const r of rx.received) {
      const id = r.json?.message?.message_id as string
      const set = idsByMessage.get(id) ?? new Set<string>()
      set.add(r.headers['x-m2m-delivery-id'])
      idsByMessage.set(id, set)
    }
    const changedDeliveryIds = [...idsByMessage].filter(([, ids]) => ids.size > 1).map(([id]) => id)
    const report: CrashReport = {
      rounds: opts.rounds,
      messages: messages.length,
      blobs: blobs.length,
      hookedMessages: expected.size,
      missingMessages,
      badBlobs,
      undelivered,
      repeatedDeliveries: rx.received.length - idsByMessage.size,
      changedDeliveryIds,
      elapsedMs: performance.now() - t0,
    }
    return report
  } finally {
    if (running) await running.crash().catch(() => {})
    rx.stop()
  }
}
