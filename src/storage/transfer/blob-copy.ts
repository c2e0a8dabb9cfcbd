/**
 * Copies blob bytes from one content-addressed store to another (the data directory's blobs into a
 * bucket), through the BlobStore port only: list the source slice by slice, read each content, let the
 * target receive it (which hashes it again while it streams) and place it. A content the target
 * already holds with the right size is skipped, so a second run copies nothing.
 *
 * Only contents the blob records want are copied; files no record names are left behind (the relay's
 * own cleanup would remove them). The target's hash of what it received must equal the content
 * address: that is the check that every copied byte arrived.
 */
import type { BlobStore } from '../../services/ports.ts'

/** Contents copied at once: a few streams keep a remote bucket busy without holding much memory. */
const DEFAULT_PARALLEL = 4

export interface BlobsCopyResult {
  /** Contents the records want (and their bytes). */
  wanted: number
  wantedBytes: number
  /** Copied by this run, hash checked. */
  copied: number
  copiedBytes: number
  /** Already in the target with the right size. */
  present: number
  /** Wanted contents that the source does not hold (the records name bytes that are gone). */
  missingInSource: string[]
  /** Files in the source that no record names: not copied. */
  unreferenced: number
  /** One line per content that could not be copied faithfully. */
  mismatches: string[]
}

export interface BlobsCopyOptions {
  parallel?: number
  progress?: (line: string) => void
}

/** Hex prefixes `00` … `ff`: the 256 slices `BlobStore.list` walks. */
export function hashSlices(): string[] {
  return Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'))
}

/**
 * Copies the contents of `wanted` (hash → size the records give) from `source` to `target`, or, when
 * `target` is null, only checks that the source holds them.
 */
export async function copyBlobs(source: BlobStore, target: BlobStore | null, wanted: Map<string, number>, opts: BlobsCopyOptions = {}): Promise<BlobsCopyResult> {
  const progress = opts.progress ?? (() => {})
  const result: BlobsCopyResult = {
    wanted: wanted.size,
    wantedBytes: [...wanted.values()].reduce((a, b) => a + b, 0),
    copied: 0,
    copiedBytes: 0,
    present: 0,
    missingInSource: [],
    unreferenced: 0,
    mismatches: [],
  }
  const seen = new Set<string>()
  const queue: string[] = []
  let lastProgress = Date.now()
  const report = (force = false) => {
    if (!force && Date.now() - lastProgress < 2000) return
    lastProgress = Date.now()
    progress(`blobs: ${result.copied} copied (${result.copiedBytes} bytes), ${result.present} already there, of ${result.wanted}`)
  }

  const copyOne = async (hashHex: string) => {
    const expected = wanted.get(hashHex)!
    const size = await source.size(hashHex)
    if (size === null) {
      result.missingInSource.push(hashHex)
      return
    }
    if (size !== expected) {
      result.mismatches.push(`blob ${hashHex}: the source file has ${size} bytes, its records say ${expected}`)
      return
    }
    if (!target) return
    if ((await target.size(hashHex)) === size) {
      result.present++
      return
    }
    const bytes = await source.read(hashHex)
    const body = bytes instanceof Blob ? bytes.stream() : bytes
    const staged = await target.receive(body, { maxBytes: size, declaredBytes: size })
    if (staged.hashHex !== hashHex || staged.size !== size) {
      await target.discard(staged)
      result.mismatches.push(`blob ${hashHex}: the bytes read hash to ${staged.hashHex} (${staged.size} bytes); not copied`)
      return
    }
    await target.place(staged)
    const placed = await target.size(hashHex)
    if (placed !== size) {
      result.mismatches.push(`blob ${hashHex}: the target holds ${placed ?? 'no'} bytes after the copy, expected ${size}`)
      return
    }
    result.copied++
    result.copiedBytes += size
    report()
  }

  const worker = async () => {
    for (let hash = queue.shift(); hash !== undefined; hash = queue.shift()) {
      try {
        await copyOne(hash)
      } catch (err) {
        // a store that fails stops the run (the next run resumes); say which content it was on
        throw new Error(`copying blob ${hash}: ${(err as Error).message.split('\n')[0]}`)
      }
    }
  }
  for (const slice of hashSlices()) {
    for await (const hashHex of source.list(slice)) {
      if (!wanted.has(hashHex)) {
        result.unreferenced++
        continue
      }
      seen.add(hashHex)
      queue.push(hashHex)
    }
    // a slice at a time: the queue never holds more than one slice of names
    await Promise.all(Array.from({ length: opts.parallel ?? DEFAULT_PARALLEL }, worker))
  }
  for (const hashHex of wanted.keys()) if (!seen.has(hashHex)) result.missingInSource.push(hashHex)
  result.missingInSource.sort()
  report(true)
  return result
}
