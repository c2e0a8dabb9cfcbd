/**
 * What handing work to a worker thread costs the thread that hands it over, when the worker sleeps
 * (the common case for the signature verifier under moderate load: it finishes a batch in well under a
 * millisecond, then waits): `postMessage`, against a store to shared memory and `Atomics.notify`. And
 * the same post to a worker that is still busy. Prints figures, asserts nothing.
 *
 *   bun bench/verify-handoff.ts
 *
 * Sizes (env): BENCH_HANDOFFS 4000 (per way, per round), BENCH_ROUNDS 3.
 */
import { benchSize } from './lib.ts'

const N = benchSize('BENCH_HANDOFFS', 4000, 500)
const ROUNDS = benchSize('BENCH_ROUNDS', 3, 1)

const POSTED = `self.onmessage = (e) => { const r = new Uint8Array(e.data.count); postMessage(r, [r.buffer]) }`
const SHARED = `
self.onmessage = (e) => {
  const ctl = new Int32Array(e.data)
  for (;;) {
    const tail = Atomics.load(ctl, 1)
    if (Atomics.load(ctl, 3) === 1) return
    if (Atomics.load(ctl, 0) === tail) {
      Atomics.store(ctl, 2, 1)
      if (Atomics.load(ctl, 0) === tail) Atomics.wait(ctl, 0, tail)
      Atomics.store(ctl, 2, 0)
      continue
    }
    Atomics.store(ctl, 1, Atomics.load(ctl, 0))
    postMessage(1)
  }
}`

const workerOf = (source: string) => new Worker(URL.createObjectURL(new Blob([source], { type: 'application/javascript' })))
/** Lets the worker finish and fall asleep before the next hand-off. */
const idle = () => new Promise((r) => setTimeout(r, 1))

async function posted(busy: boolean): Promise<number> {
  const worker = workerOf(POSTED)
  let spent = 0
  for (let i = 0; i < N; i++) {
    const answered = new Promise((r) => (worker.onmessage = r))
    if (!busy) await idle()
    const buf = new ArrayBuffer(300)
    const t = performance.now()
    worker.postMessage({ id: i, buf, count: 1 }, [buf])
    spent += performance.now() - t
    if (!busy || i % 64 === 63) await answered
  }
  worker.terminate()
  return (spent * 1000) / N
}

async function shared(): Promise<number> {
  const worker = workerOf(SHARED)
  const ctl = new Int32Array(new SharedArrayBuffer(16))
  worker.postMessage(ctl.buffer)
  let spent = 0
  for (let i = 0; i < N; i++) {
    const answered = new Promise((r) => (worker.onmessage = r))
    await idle()
    const t = performance.now()
    Atomics.add(ctl, 0, 1)
    if (Atomics.load(ctl, 2) === 1) Atomics.notify(ctl, 0)
    spent += performance.now() - t
    await answered
  }
  Atomics.store(ctl, 3, 1)
  Atomics.notify(ctl, 0)
  worker.terminate()
  return (spent * 1000) / N
}

console.log(`bench/verify-handoff.ts — bun ${Bun.version}, ${N} hand-offs per way; µs spent by the handing thread`)
for (let round = 1; round <= ROUNDS; round++) {
  const asleepPost = await posted(false)
  const asleepShared = await shared()
  const busyPost = await posted(true)
  console.log(`  round ${round}: to a sleeping worker, postMessage ${asleepPost.toFixed(1)}, shared memory + notify ${asleepShared.toFixed(1)}; postMessage to a busy worker ${busyPost.toFixed(1)}`)
}
