/**
 * Ed25519 verification on a worker thread, so the event loop keeps parsing, routing and answering
 * while signatures are checked (the check is the largest single cost of a signed request: ~65 µs).
 * Items queued during one turn of the event loop travel to the worker as one packed message, and
 * batches are pipelined (the next one is sent without waiting for the last). The worker starts on the
 * first busy turn (several signatures waiting at once), so an idle relay runs one thread. Without a
 * worker (disabled, not yet needed, or failed) verification runs inline with the same function.
 */
import { passesPrechecks, verifyEd25519 } from './verify.ts'

// Inline source: the compiled executable needs no extra entry point. The prechecks (canonical S, no
// small-order points) run on the main thread before an item is queued; the worker does the curve arithmetic.
const WORKER_SOURCE = `
import { createPublicKey, verify } from 'node:crypto'
const SPKI = Buffer.from('302a300506032b6570032100', 'hex')
self.onmessage = (event) => {
  const { id, buf, count } = event.data
  const bytes = new Uint8Array(buf)
  const view = new DataView(buf)
  const results = new Uint8Array(count)
  let off = 0
  for (let i = 0; i < count; i++) {
    const len = view.getUint32(off + 96)
    try {
      const key = createPublicKey({ key: Buffer.concat([SPKI, bytes.subarray(off, off + 32)]), format: 'der', type: 'spki' })
      results[i] = verify(null, bytes.subarray(off + 100, off + 100 + len), key, bytes.subarray(off + 32, off + 96)) ? 1 : 0
    } catch {
      results[i] = 0
    }
    off += 100 + len
  }
  postMessage({ id, results }, [results.buffer])
}
`

interface Item {
  key: Uint8Array
  sig: Uint8Array
  msg: Uint8Array
  resolve: (ok: boolean) => void
}

const encoder = new TextEncoder()

/** Signatures waiting in one turn that mark the relay as busy enough for a second thread. */
const BUSY_TURN = 4

export class VerifyPool {
  private worker: Worker | null = null
  private readonly inflight = new Map<number, Item[]>()
  private queue: Item[] = []
  private scheduled = false
  private nextId = 1

  private allowWorker: boolean

  constructor(useWorker: boolean, private readonly onFailure: (error: string) => void = () => {}) {
    this.allowWorker = useWorker
  }

  private spawn(): void {
    this.allowWorker = false // one attempt
    try {
      const worker = new Worker(URL.createObjectURL(new Blob([WORKER_SOURCE], { type: 'application/javascript' })))
      worker.onmessage = (e: MessageEvent<{ id: number; results: Uint8Array }>) => {
        const items = this.inflight.get(e.data.id)
        this.inflight.delete(e.data.id)
        items?.forEach((item, j) => item.resolve(e.data.results[j] === 1))
      }
      worker.onerror = (e) => this.fail(String((e as ErrorEvent).message ?? e))
      worker.unref()
      this.worker = worker
    } catch (err) {
      this.fail(String(err))
    }
  }

  /** True when the signature over `message` verifies under `publicKey` (RFC 8032, canonical S only). */
  verify(publicKey: Uint8Array, message: string, signature: Uint8Array): Promise<boolean> {
    if (!passesPrechecks(publicKey, signature)) return Promise.resolve(false)
    if (!this.worker && !this.allowWorker) return Promise.resolve(verifyEd25519(publicKey, message, signature))
    return new Promise((resolve) => {
      this.queue.push({ key: publicKey, sig: signature, msg: encoder.encode(message), resolve })
      if (!this.scheduled) {
        this.scheduled = true
        setImmediate(() => this.dispatch())
      }
    })
  }

  private dispatch(): void {
    this.scheduled = false
    const items = this.queue
    this.queue = []
    if (items.length === 0) return
    if (!this.worker && this.allowWorker && items.length >= BUSY_TURN) this.spawn()
    if (!this.worker) return this.verifyInline(items)
    let size = 0
    for (const it of items) size += 100 + it.msg.length
    const buf = new ArrayBuffer(size)
    const bytes = new Uint8Array(buf)
    const view = new DataView(buf)
    let off = 0
    for (const it of items) {
      bytes.set(it.key, off)
      bytes.set(it.sig, off + 32)
      view.setUint32(off + 96, it.msg.length)
      bytes.set(it.msg, off + 100)
      off += 100 + it.msg.length
    }
    const id = this.nextId++
    this.inflight.set(id, items)
    this.worker.postMessage({ id, buf, count: items.length }, [buf])
  }

  private verifyInline(items: Item[]): void {
    for (const it of items) it.resolve(verifyEd25519(it.key, it.msg, it.sig))
  }

  /** A broken worker hands everything back to inline verification; nothing waiting is lost. */
  private fail(error: string): void {
    this.onFailure(error)
    this.worker?.terminate()
    this.worker = null
    for (const items of this.inflight.values()) this.verifyInline(items)
    this.inflight.clear()
  }

  get usesWorker(): boolean {
    return this.worker !== null
  }

  stop(): void {
    this.allowWorker = false
    this.worker?.terminate()
    this.worker = null
    for (const items of this.inflight.values()) this.verifyInline(items)
    this.inflight.clear()
  }
}
