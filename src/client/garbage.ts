/**
 * A memory budget for large transfers. node:crypto returns every cipher call's output in new memory
 * (64 KiB per attachment segment: 100 MiB of garbage per pass over a 100 MiB file), and so do the
 * chunks of a fetch response; Bun's collector lets much of it pile up before it runs, and a 100 MiB
 * encrypted download grew the process by 33–45 MiB.
 *
 * The meter looks at the resident size every mebibyte of data (about 13 µs) and, when the transfer
 * has grown it by more than the budget, runs a full collection (`Bun.gc(true)`, which also hands freed
 * memory back to the system; 10–20 ms with the client's heap, four or five times per 100 MiB
 * download). A collection that frees too little moves the line up, so a process that grows for other
 * reasons is not collected over and over. Where there is no `Bun.gc` (Node, browsers) the meter does
 * nothing.
 */
const bunGc = (globalThis as { Bun?: { gc?: (force?: boolean) => void } }).Bun?.gc
const residentBytes = typeof process !== 'undefined' && typeof process.memoryUsage?.rss === 'function' ? () => process.memoryUsage.rss() : null

/** Growth of the resident size a transfer is allowed before a collection. */
export const TRANSFER_MEMORY_BUDGET = 16 * 1024 * 1024
const CHECK_EVERY_BYTES = 1024 * 1024

/** A meter for one transfer: call it with the bytes each step moved. */
export function memoryBudget(budgetBytes = TRANSFER_MEMORY_BUDGET): (bytes: number) => void {
  if (!bunGc || !residentBytes) return () => {}
  const gc = bunGc
  const rss = residentBytes
  let limit = rss() + budgetBytes
  let moved = 0
  return (bytes) => {
    moved += bytes
    if (moved < CHECK_EVERY_BYTES) return
    moved = 0
    if (rss() <= limit) return
    gc(true)
    limit = Math.max(limit, rss() + budgetBytes / 2)
  }
}
