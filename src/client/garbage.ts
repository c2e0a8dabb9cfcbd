/**
 * Keeping large transfers' garbage from piling up. node:crypto returns every cipher call's output in
 * new memory (64 KiB per attachment segment: 100 MiB of garbage per pass over a 100 MiB file), and so
 * does a fetch response for each of its chunks; Bun's collector lets much of it pile up before it
 * runs: a 100 MiB encrypted upload grew the process by 33–37 MiB, a download by 33–45 MiB.
 *
 * Two measures, both for Bun only (`Bun.gc`; elsewhere they do nothing):
 * - an upload asks for an asynchronous collection every 4 MiB (`Bun.gc(false)`: microseconds to ask,
 *   the work on the collector's own thread). With its request chunks reused, an upload's only garbage
 *   is the cipher's output, and that keeps up with it.
 * - a download asks the same, and keeps a budget besides: every mebibyte it looks at the resident size
 *   (about 13 µs) and, once the transfer has grown it by more than 16 MiB, runs a full collection
 *   (`Bun.gc(true)`, which also hands freed memory back to the system: 10–20 ms, a few times per
 *   100 MiB). Hints alone did not hold a download's growth down (+28–41 MiB measured). After a
 *   collection the line moves up by the budget, so a process that grows for other reasons is not
 *   collected over and over.
 */
const bunGc = (globalThis as { Bun?: { gc?: (force?: boolean) => void } }).Bun?.gc
const residentBytes = typeof process !== 'undefined' && typeof process.memoryUsage?.rss === 'function' ? () => process.memoryUsage.rss() : null

const HINT_EVERY_BYTES = 4 * 1024 * 1024
/** Growth of the resident size a download is allowed before a full collection. */
export const DOWNLOAD_MEMORY_BUDGET = 16 * 1024 * 1024
const CHECK_EVERY_BYTES = 1024 * 1024

/** For an upload: call it with the bytes each step moved; every 4 MiB it asks for a collection. */
export function collectionHints(everyBytes = HINT_EVERY_BYTES): (bytes: number) => void {
  if (!bunGc) return () => {}
  const gc = bunGc
  let moved = 0
  return (bytes) => {
    moved += bytes
    if (moved < everyBytes) return
    moved = 0
    gc(false)
  }
}

/** For a download: call it with the bytes each step moved; past the budget it collects at once. */
export function memoryBudget(budgetBytes = DOWNLOAD_MEMORY_BUDGET): (bytes: number) => void {
  if (!bunGc || !residentBytes) return () => {}
  const gc = bunGc
  const rss = residentBytes
  let limit = rss() + budgetBytes
  let moved = 0
  let checks = 0
  return (bytes) => {
    moved += bytes
    if (moved < CHECK_EVERY_BYTES) return
    moved = 0
    if (++checks % (HINT_EVERY_BYTES / CHECK_EVERY_BYTES) === 0) gc(false)
    if (rss() <= limit) return
    gc(true)
    limit = Math.max(limit, rss() + budgetBytes)
  }
}
