/**
 * Large test files without large memory: written and hashed a MiB at a time, so a 100 MiB file costs a
 * MiB of the test's memory, not 100 (or 200 to compare two of them).
 */
import { randomBytes } from 'node:crypto'
import { closeSync, openSync, writeSync } from 'node:fs'

const CHUNK_BYTES = 1024 * 1024
/** How often the marker recurs: every 64 KiB segment of an encrypted file holds it many times. */
const MARKER_EVERY = 4096

/**
 * Writes `size` bytes to `path` — random, so a segment put in the wrong place shows, with `marker` at
 * every 4 KiB where it fits, so a leak of any part shows — and returns their SHA-256 (hex).
 */
export function writeMarkedFile(path: string, size: number, marker: string): string {
  const hash = new Bun.CryptoHasher('sha256')
  const fd = openSync(path, 'w')
  try {
    for (let at = 0; at < size; at += CHUNK_BYTES) {
      const chunk = randomBytes(Math.min(CHUNK_BYTES, size - at))
      for (let i = 0; i + marker.length <= chunk.length; i += MARKER_EVERY) chunk.write(marker, i)
      writeSync(fd, chunk)
      hash.update(chunk)
    }
  } finally {
    closeSync(fd)
  }
  return hash.digest('hex')
}

/** SHA-256 (hex) of a file, read as a stream. */
export async function sha256File(path: string): Promise<string> {
  const hash = new Bun.CryptoHasher('sha256')
  for await (const chunk of Bun.file(path).stream() as unknown as AsyncIterable<Uint8Array>) hash.update(chunk)
  return hash.digest('hex')
}
