/**
 * A hint to collect garbage every few mebibytes of a large transfer. node:crypto returns every cipher
 * call's output in new memory (64 KiB per attachment segment, 100 MiB of garbage per pass over a
 * 100 MiB file), and Bun's collector counts little of it towards its next collection: without a hint
 * the process grows by 20–30 MiB before the memory is reused. `Bun.gc(false)` starts an asynchronous
 * collection and lets mimalloc reuse what was freed; it costs microseconds to ask. Elsewhere
 * (Node, browsers) the hint does nothing.
 */
const bunGc = (globalThis as { Bun?: { gc?: (force?: boolean) => void } }).Bun?.gc

const HINT_EVERY_BYTES = 4 * 1024 * 1024

/** Counts bytes of garbage made; asks for a collection each time `everyBytes` more were counted. */
export function garbageHint(everyBytes = HINT_EVERY_BYTES): (bytes: number) => void {
  if (!bunGc) return () => {}
  let made = 0
  return (bytes) => {
    made += bytes
    if (made < everyBytes) return
    made = 0
    bunGc(false)
  }
}
