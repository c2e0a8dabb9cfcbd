/**
 * A short soak of the whole relay: signed requests over real sockets at a steady rate for 18 s, with a
 * 5 s signature tolerance and the relay's clock running 10× faster than real time, so that a replay
 * entry (kept 2 × tolerance + the clock-skew margin, 70 simulated seconds) expires after 7 real seconds
 * and the prune job (every real second) sees more than two windows go by. The replay log holds only the
 * entries of the last window — at each sample no more rows than requests sent within it and two sweeps
 * — so it stays flat once the first window has passed, and so do both WALs. Real SQLite files, the
 * relay's own scheduler; only the clock is simulated. (The 10-minute version, on the binary at 333
 * requests/s, is `bun bench/abuse.ts dist/relay --parts soak --duration 10m`.)
 */
import { afterAll, expect, test } from 'bun:test'
import { statSync } from 'node:fs'
import { join } from 'node:path'
import { generateKeyPair, signRequest } from '../../src/auth/sign.ts'
import { CLOCK_SKEW_MARGIN_MS } from '../../src/services/authenticator.ts'
import { JOURNAL_SIZE_LIMIT_BYTES } from '../../src/storage/sqlite/database.ts'
import { startTestRelay, type TestRelay } from '../support/harness.ts'

const RUN_MS = 18_000
const RATE_PER_S = 150
const SPEEDUP = 10
const TOLERANCE_MS = 5000
const SWEEP_MS = 1000
/** How long an entry is kept, in the relay's (simulated) time. */
const WINDOW_MS = 2 * TOLERANCE_MS + CLOCK_SKEW_MARGIN_MS
const MiB = 1024 * 1024

let t: TestRelay | undefined
afterAll(() => t?.close())

const size = (path: string) => {
  try {
    return statSync(path).size
  } catch {
    return 0
  }
}

test(`signed requests at ${RATE_PER_S}/s for ${RUN_MS / 1000} s, three replay windows: replay log rows and WALs stay flat`, async () => {
  t = await startTestRelay({ host: '127.0.0.1', timestampToleranceMs: TOLERANCE_MS, sweepIntervalMs: SWEEP_MS, rateLimits: { requestsPerMin: 0 } })
  const { port } = await t.relay.start()
  const relay = t
  const replay = relay.relay.storage.replay as unknown as { rows(): number }
  const agents = Array.from({ length: 50 }, () => generateKeyPair())
  const T0 = relay.clock.now()
  const started = performance.now()
  const simNow = () => T0 + Math.floor((performance.now() - started) * SPEEDUP)

  /** Simulated send times of the requests answered 200, in order. */
  const sentAt: number[] = []
  const statuses: Record<string, number> = {}
  const samples: { sim: number; rows: number; replayWal: number; relayWal: number }[] = []
  const inFlight = new Set<Promise<void>>()
  let next = 0
  let nextSample = 1000
  for (;;) {
    const elapsed = performance.now() - started
    if (elapsed >= RUN_MS) break
    relay.clock.set(Math.max(relay.clock.now(), simNow()))
    const due = Math.floor((elapsed / 1000) * RATE_PER_S)
    while (next < due && inFlight.size < 64) {
      const keys = agents[next++ % agents.length]
      const path = `/v1/agents/${keys.publicKey}`
      const at = relay.clock.now()
      const p: Promise<void> = fetch(`http://127.0.0.1:${port}${path}`, { headers: { ...signRequest(keys, 'GET', path, '', new Date(at).toISOString()) } })
        .then(async (res) => {
          await res.arrayBuffer()
          statuses[res.status] = (statuses[res.status] ?? 0) + 1
          if (res.status === 200) sentAt.push(at)
        })
        .finally(() => inFlight.delete(p))
      inFlight.add(p)
    }
    if (elapsed >= nextSample) {
      nextSample += 1000
      samples.push({ sim: relay.clock.now(), rows: replay.rows(), replayWal: size(join(relay.dataDir, 'replay.db-wal')), relayWal: size(join(relay.dataDir, 'relay.db-wal')) })
    }
    await Bun.sleep(5)
  }
  await Promise.all(inFlight)

  const shown = samples.map((s) => `${Math.round((s.sim - T0) / 1000)}s ${s.rows} rows, wal ${s.replayWal}/${s.relayWal}`).join('; ')
  const ok = statuses['200'] ?? 0
  const total = Object.values(statuses).reduce((a, b) => a + b, 0)
  // a request the loaded machine held longer than half a real second falls outside the window (401)
  expect({ ok: ok >= 0.9 * total && ok >= 0.5 * RATE_PER_S * (RUN_MS / 1000), statuses }).toEqual({ ok: true, statuses })
  // at every sample, no more rows than requests accepted within the window and two sweeps before it
  sentAt.sort((a, b) => a - b)
  for (const s of samples) {
    const bound = sentAt.filter((at) => at >= s.sim - WINDOW_MS - 2 * SWEEP_MS * SPEEDUP).length
    expect({ sample: Math.round((s.sim - T0) / 1000), within: s.rows <= bound, shown }).toEqual({ sample: Math.round((s.sim - T0) / 1000), within: true, shown })
  }
  const max = (xs: number[]) => Math.max(...xs)
  const third = Math.floor(samples.length / 3)
  const middle = samples.slice(third, 2 * third)
  const last = samples.slice(2 * third)
  // flat: the last third holds no more than the middle third (a rate that wavers by a fifth allowed),
  // and far fewer than the run wrote
  expect({ flat: max(last.map((s) => s.rows)) <= 1.2 * max(middle.map((s) => s.rows)), shown }).toEqual({ flat: true, shown })
  expect(ok).toBeGreaterThan(2 * max(last.map((s) => s.rows)))
  for (const key of ['replayWal', 'relayWal'] as const) {
    expect({ key, max: max(samples.map((s) => s[key])) <= JOURNAL_SIZE_LIMIT_BYTES + 4 * MiB, shown }).toEqual({ key, max: true, shown })
    expect({ key, flat: max(last.map((s) => s[key])) <= max(middle.map((s) => s[key])) + 4 * MiB, shown }).toEqual({ key, flat: true, shown })
  }
  console.log(`${ok} of ${total} requests answered 200; ${shown}`)
}, 40_000)
