/**
 * WAL checkpoints on a worker thread. SQLite's automatic checkpoint runs inside whichever commit
 * pushes the WAL past 1,000 pages, on the main thread, and includes fsyncs: a stall of 50–150 ms for
 * the request (or sweep batch) that happens to trigger it. Here a second connection on a worker thread
 * runs PASSIVE checkpoints every `intervalMs` instead (they never block writers or readers), and the
 * main connection's automatic checkpoint is turned off once that worker is ready. If the worker fails,
 * the automatic checkpoint comes back. The worker is built from inline source, so the compiled binary
 * needs no extra entry point.
 *
 * The WAL's size is bounded too. SQLite writes the WAL from its start again only when a write begins
 * after a checkpoint that copied every frame; under steady writes a passive checkpoint is always a
 * little behind, so the WAL would grow for as long as the load lasts. Past `RESTART_AFTER_BYTES` the
 * worker first catches up: passive passes, each copying what was written during the one before, until
 * one pass finds every frame copied and nothing written since. The next write, whoever makes it, then
 * starts the WAL afresh, and no writer was held off. When the WAL is still past that size at the next
 * tick (writes never paused long enough), the worker runs a RESTART checkpoint instead, which holds
 * writers off for its duration (a few ms to ~10 ms; the relay's writes wait on timers meanwhile) and
 * makes the next write start the WAL afresh. SQLite then cuts a WAL larger than `journal_size_limit`
 * back to it (database.ts). Once writes stop for `IDLE_TICKS` ticks, a TRUNCATE checkpoint empties the
 * WAL. RESTART and TRUNCATE run with no busy timeout: when the writer or a reader is in the way they
 * give up at once and are tried at the next tick.
 */
import type { Database } from 'bun:sqlite'
import { closeSync, openSync, readSync, statSync } from 'node:fs'
import type { Logger } from '../../lib/logger.ts'

const WORKER_SOURCE = `
import { Database } from 'bun:sqlite'
let db
self.onmessage = (event) => {
  const m = event.data
  try {
    if (m.type === 'open') {
      db = new Database(m.path)
      db.run('PRAGMA busy_timeout = 5000')
      postMessage({ type: 'ready' })
    } else if (m.type === 'checkpoint') {
      const started = performance.now()
      if (m.mode === 'CATCHUP') {
        // passive passes until one finds every frame copied and nothing written since the pass before:
        // the next write then starts the WAL afresh (a pass with nothing to copy costs next to nothing)
        let result
        let copied = -1
        for (let pass = 0; pass < 16; pass++) {
          result = db.query('PRAGMA wal_checkpoint(PASSIVE)').get()
          const all = !result.busy && result.log === result.checkpointed
          if (all && result.log === copied) break
          copied = all ? result.log : -1
        }
        postMessage({ type: 'done', result, mode: m.mode, ms: performance.now() - started })
        return
      }
      // RESTART and TRUNCATE hold writers off while they copy: a passive pass copies most frames first
      if (m.mode !== 'PASSIVE') db.query('PRAGMA wal_checkpoint(PASSIVE)').get()
      // and they wait for the writer and for readers: never here (the next tick tries again)
      if (m.mode !== 'PASSIVE') db.run('PRAGMA busy_timeout = 0')
      let result
      try {
        result = db.query('PRAGMA wal_checkpoint(' + m.mode + ')').get()
      } catch (err) {
        if (m.mode === 'PASSIVE') throw err
        result = { busy: 1 }
      } finally {
        if (m.mode !== 'PASSIVE') db.run('PRAGMA busy_timeout = 5000')
      }
      postMessage({ type: 'done', result, mode: m.mode, ms: performance.now() - started })
    } else if (m.type === 'close') {
      db?.close()
      postMessage({ type: 'closed' })
    }
  } catch (err) {
    postMessage({ type: 'failed', error: String(err && err.message || err) })
  }
}
`

/** WAL size at which the worker starts (a quarter of SQLite's automatic threshold of 1,000 pages). */
const WORKER_AFTER_WAL_BYTES = 1024 * 1024

/** WAL size past which the worker's checkpoints make the WAL start afresh (see the header). */
export const RESTART_AFTER_BYTES = 4 * 1024 * 1024

/** Ticks without the WAL changing after which it is truncated (1 s at the default interval). */
const IDLE_TICKS = 5

/** SQLite's default automatic checkpoint threshold, restored when the worker is gone. */
const DEFAULT_AUTOCHECKPOINT_PAGES = 1000

/**
 * Bytes of log the WAL holds now — its frames since it was last written from its start, whatever the
 * file's size (a WAL written afresh keeps its length up to journal_size_limit). Read from the wal-index
 * header (the `-shm` file, https://www.sqlite.org/walformat.html: mxFrame, a native-order 32-bit
 * integer at byte 16); each frame is a page and a 24-byte header. 0 without a WAL.
 */
export function walContentBytes(path: string, pageSize: number): number {
  let fd: number | undefined
  try {
    fd = openSync(`${path}-shm`, 'r')
    const header = new Uint8Array(4)
    if (readSync(fd, header, 0, 4, 16) !== 4) return 0
    return new DataView(header.buffer).getUint32(0, true) * (pageSize + 24)
  } catch {
    return 0
  } finally {
    if (fd !== undefined) closeSync(fd)
  }
}

export interface CheckpointStats {
  runs: number
  last_ms: number | null
  max_ms: number
  on_worker: boolean
  /**
   * Catch-ups run past RESTART_AFTER_BYTES (passive passes until every frame is copied), RESTART
   * checkpoints where those did not bring the WAL back; TRUNCATE ones run while idle, and how many of
   * those emptied the WAL.
   */
  catchups: number
  restarts: number
  truncations: number
  truncated: number
}

export class Checkpointer {
  private worker: Worker | null = null
  private timer: ReturnType<typeof setInterval> | undefined
  private waitTimer: ReturnType<typeof setInterval> | undefined
  private busy = false
  private ready = false
  private closed: (() => void) | null = null
  private readonly stats: CheckpointStats = { runs: 0, last_ms: null, max_ms: 0, on_worker: false, catchups: 0, restarts: 0, truncations: 0, truncated: 0 }
  /** The WAL's size at the last tick, and for how many ticks it has not changed. */
  private lastWalBytes = -1
  private lastWalModified = 0
  private idleTicks = 0
  /** Consecutive ticks that found the WAL past RESTART_AFTER_BYTES without it starting afresh between them, and what it held at the last tick. */
  private overTicks = 0
  private lastContent = 0
  /** A background writer asked to catch up (`caughtUp`), and who waits for it. */
  private catchUpRequested = false
  private catchUpWaiters: (() => void)[] = []
  private readonly pageSize: number
  /** Told when a checkpoint that holds writers off (RESTART, TRUNCATE) has ended. */
  private writersFree: () => void = () => {}

  constructor(
    private readonly client: Database,
    private readonly path: string,
    private readonly logger: Logger,
    private readonly intervalMs = 200,
  ) {
    this.pageSize = (client.query('PRAGMA page_size').get() as { page_size: number } | null)?.page_size ?? 4096
  }

  /**
   * Starts the worker once the WAL first reaches `WORKER_AFTER_WAL_BYTES` (checked every second), so
   * an idle relay does not pay for a second thread; until then SQLite's automatic checkpoint, far
   * below its threshold, never runs.
   */
  start(): this {
    const wal = `${this.path}-wal`
    const check = () => {
      let size = 0
      try {
        size = statSync(wal).size
      } catch {
        // no WAL yet
      }
      if (size < WORKER_AFTER_WAL_BYTES) return
      clearInterval(this.waitTimer)
      this.spawn()
    }
    this.waitTimer = setInterval(check, 1000)
    ;(this.waitTimer as { unref?: () => void }).unref?.()
    check()
    return this
  }

  private spawn(): void {
    try {
      const worker = new Worker(URL.createObjectURL(new Blob([WORKER_SOURCE], { type: 'application/javascript' })))
      worker.onmessage = (event: MessageEvent) => this.onMessage(event.data)
      worker.onerror = (event) => this.fail(String((event as ErrorEvent).message ?? event))
      worker.unref()
      worker.postMessage({ type: 'open', path: this.path })
      this.worker = worker
    } catch (err) {
      this.fail(String(err))
    }
  }

  /**
   * For background writers (the expiry sweep), between their batches: when the WAL is past
   * RESTART_AFTER_BYTES, catches up now (see the header) and resolves once that ran (at most `maxMs`);
   * at once otherwise, or while checkpoints are not on the worker. The frames a batch wrote are then
   * copied while the batch's writer pauses, and the next write starts the WAL afresh without a RESTART,
   * which would hold requests' writes off behind its copy and sync.
   */
  caughtUp(maxMs = 1000): Promise<void> {
    if (!this.ready || !this.worker || walContentBytes(this.path, this.pageSize) <= RESTART_AFTER_BYTES) return Promise.resolve()
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, maxMs)
      function done() {
        clearTimeout(timer)
        resolve()
      }
      this.catchUpWaiters.push(done)
      this.catchUpRequested = true
      if (!this.busy) this.tick()
    })
  }

  /** `listener` runs whenever a checkpoint that held writers off has ended (the writer retries its lock then). */
  onWritersFree(listener: () => void): this {
    this.writersFree = listener
    return this
  }

  private wakeCatchUpWaiters(): void {
    this.catchUpRequested = false
    for (const done of this.catchUpWaiters.splice(0)) done()
  }

  report(): CheckpointStats {
    return { ...this.stats, max_ms: Math.round(this.stats.max_ms * 100) / 100 }
  }

  /** Ends the worker (its connection closed) and gives checkpoints back to the main connection. */
  async stop(): Promise<void> {
    clearInterval(this.waitTimer)
    clearInterval(this.timer)
    const worker = this.worker
    if (!worker) return
    if (this.ready) {
      const done = new Promise<void>((resolve) => (this.closed = resolve))
      worker.postMessage({ type: 'close' })
      await Promise.race([done, Bun.sleep(2000)])
    }
    this.release()
  }

  private onMessage(m: { type: string; ms?: number; error?: string; mode?: string; result?: { busy?: number } }): void {
    if (m.type === 'ready') {
      if (!this.worker) return // stopped while the worker was starting
      try {
        this.client.run('PRAGMA wal_autocheckpoint = 0')
      } catch {
        return this.release() // the main connection closed under us
      }
      this.ready = true
      this.stats.on_worker = true
      this.timer = setInterval(() => this.tick(), this.intervalMs)
      ;(this.timer as { unref?: () => void }).unref?.()
    } else if (m.type === 'done') {
      this.busy = false
      this.stats.runs++
      this.stats.last_ms = m.ms ?? null
      this.stats.max_ms = Math.max(this.stats.max_ms, m.ms ?? 0)
      if (m.mode === 'RESTART') this.stats.restarts++
      if (m.mode === 'CATCHUP') {
        this.stats.catchups++
        this.wakeCatchUpWaiters()
      } else if (m.mode !== 'PASSIVE') {
        this.writersFree()
        this.wakeCatchUpWaiters()
      } else if (this.catchUpRequested) this.tick() // asked for while this pass ran
      if (m.mode === 'TRUNCATE') {
        this.stats.truncations++
        if (!m.result?.busy) this.stats.truncated++
      }
    } else if (m.type === 'closed') {
      this.closed?.()
    } else if (m.type === 'failed') {
      this.fail(m.error ?? 'unknown error')
    }
  }

  private tick(): void {
    if (this.busy || !this.worker) return
    let size = 0
    let modified = 0
    try {
      const st = statSync(`${this.path}-wal`)
      size = st.size
      modified = st.mtimeMs
    } catch {
      // no WAL
    }
    // a WAL written again from its start keeps its size: its modification time tells writes apart
    this.idleTicks = size === this.lastWalBytes && modified === this.lastWalModified ? this.idleTicks + 1 : 0
    this.lastWalBytes = size
    this.lastWalModified = modified
    const truncate = size > 0 && this.idleTicks >= IDLE_TICKS
    if (truncate) this.idleTicks = 0
    const content = walContentBytes(this.path, this.pageSize)
    const over = content > RESTART_AFTER_BYTES
    // a WAL that holds less than at the last tick was started afresh meanwhile: its size is new growth
    this.overTicks = !over ? 0 : content < this.lastContent ? 1 : this.overTicks + 1
    this.lastContent = content
    // past the size: catch up first; a RESTART when the WAL is still past it a tick later
    const mode = truncate ? 'TRUNCATE' : this.catchUpRequested ? 'CATCHUP' : this.overTicks > 1 ? 'RESTART' : over ? 'CATCHUP' : 'PASSIVE'
    this.busy = true
    this.worker.postMessage({ type: 'checkpoint', mode })
  }

  private fail(error: string): void {
    this.logger.warn('checkpoint worker failed; checkpoints return to the main connection', { error })
    clearInterval(this.timer)
    this.release()
  }

  private release(): void {
    this.wakeCatchUpWaiters()
    this.worker?.terminate()
    this.worker = null
    this.ready = false
    this.stats.on_worker = false
    try {
      this.client.run(`PRAGMA wal_autocheckpoint = ${DEFAULT_AUTOCHECKPOINT_PAGES}`)
    } catch {
      // the connection is already closed
    }
  }
}
