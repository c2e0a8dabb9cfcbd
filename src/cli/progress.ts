/**
 * A progress bar for long transfers (upload, download). It draws on standard error only when that is
 * a terminal, at most ten times a second, and erases itself when done; when output is piped it prints
 * nothing, so scripts and logs see only the command's result.
 */
import { humanBytes } from './format.ts'

export interface ProgressStream {
  write(s: string): unknown
  isTTY?: boolean
  columns?: number
}

export interface ProgressOptions {
  label: string
  /** Total bytes when known; without it the bar shows bytes and rate only. */
  total?: number
  stream?: ProgressStream
  /** Defaults to `stream.isTTY`. */
  isTTY?: boolean
  /** Milliseconds; injectable for tests. */
  now?: () => number
  /** Minimum time between redraws. */
  intervalMs?: number
}

export interface Progress {
  /** Adds transferred bytes. */
  add(bytes: number): void
  /** Sets the transferred byte count. */
  set(bytes: number): void
  /** Draws the final state and ends the line. */
  done(): void
  /** Erases the bar (the caller prints the error). */
  fail(): void
  readonly bytes: number
}

const BAR_WIDTH = 24

/** The text of one frame, without control characters; exported for tests and alternative renderers. */
export function progressLine(label: string, bytes: number, total: number | undefined, elapsedMs: number): string {
  const rate = elapsedMs > 0 ? `${humanBytes(Math.round((bytes * 1000) / elapsedMs))}/s` : ''
  if (total === undefined || total <= 0) return `${label} ${humanBytes(bytes)} ${rate}`.trimEnd()
  const fraction = Math.min(1, bytes / total)
  const filled = Math.round(fraction * BAR_WIDTH)
  const bar = '#'.repeat(filled) + '-'.repeat(BAR_WIDTH - filled)
  const pct = `${Math.floor(fraction * 100)}%`.padStart(4)
  return `${label} [${bar}] ${pct} ${humanBytes(bytes)} / ${humanBytes(total)} ${rate}`.trimEnd()
}

export function createProgress(opts: ProgressOptions): Progress {
  const stream = opts.stream ?? process.stderr
  const tty = opts.isTTY ?? stream.isTTY === true
  const now = opts.now ?? (() => performance.now())
  const interval = opts.intervalMs ?? 100
  const started = now()
  let bytes = 0
  let lastDraw = -Infinity
  let finished = false

  const draw = (force: boolean) => {
    if (!tty || finished) return
    const t = now()
    if (!force && t - lastDraw < interval) return
    lastDraw = t
    let line = progressLine(opts.label, bytes, opts.total, t - started)
    const width = stream.columns ?? 80
    if (line.length > width - 1) line = line.slice(0, width - 1)
    // \r to the line start, ESC[K to erase what a longer previous frame left behind
    stream.write(`\r${line}\x1b[K`)
  }

  return {
    get bytes() {
      return bytes
    },
    add(n) {
      bytes += n
      draw(false)
    },
    set(n) {
      bytes = n
      draw(false)
    },
    done() {
      draw(true)
      if (tty && !finished) stream.write('\n')
      finished = true
    },
    fail() {
      if (tty && !finished) stream.write('\r\x1b[K')
      finished = true
    },
  }
}

/** Passes bytes through unchanged while counting them into `progress` (for request and response bodies). */
export function countingStream(progress: Progress): TransformStream<Uint8Array, Uint8Array> {
  return new TransformStream({
    transform(chunk, controller) {
      progress.add(chunk.byteLength)
      controller.enqueue(chunk)
    },
  })
}
