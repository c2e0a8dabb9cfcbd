/**
 * What a relay left on disk, for the end-to-end encryption tests: every file under a directory (the
 * data directory: relay.db, its -wal, the blob files; an S3 server's bucket), the file of one blob, and
 * whether any of them holds a plaintext marker. Files are searched a chunk at a time, so a 100 MiB blob is never read whole.
 */
import { expect } from 'bun:test'
import { closeSync, existsSync, openSync, readdirSync, readSync, statSync } from 'node:fs'
import { join } from 'node:path'

/** Every regular file under `dir`, recursively; none when it does not exist. */
export function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return []
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    return statSync(path).isDirectory() ? filesUnder(path) : [path]
  })
}

const CHUNK_BYTES = 1024 * 1024

/** Whether `file` contains `marker`, read in 1 MiB chunks that overlap by the marker's length. */
export function fileContains(file: string, marker: string): boolean {
  const needle = Buffer.from(marker)
  const buf = Buffer.alloc(CHUNK_BYTES + needle.length)
  const fd = openSync(file, 'r')
  try {
    let kept = 0
    for (;;) {
      const n = readSync(fd, buf, kept, CHUNK_BYTES, null)
      if (n === 0) return false
      const filled = kept + n
      if (buf.subarray(0, filled).includes(needle)) return true
      // the tail that could start a marker cut by the chunk boundary
      kept = Math.min(needle.length - 1, filled)
      buf.copy(buf, 0, filled - kept, filled)
    }
  } finally {
    closeSync(fd)
  }
}

/** The file of a blob in a data directory's content-addressed blob store: named by its hash (`sha256:HEX`). */
export function blobFileOf(dataDir: string, hash: string): string {
  const hex = hash.replace(/^sha256:/, '')
  const file = filesUnder(join(dataDir, 'blobs')).find((f) => f.endsWith(hex))
  if (!file) throw new Error(`no file for blob ${hash} under ${dataDir}/blobs`)
  return file
}

/** Expects files (at least one) and that none of them holds `marker`; names the file that does. */
export function expectNoMarkerIn(files: string[], marker: string): void {
  expect(files.length).toBeGreaterThan(0)
  for (const file of files) expect({ file, found: fileContains(file, marker) }).toEqual({ file, found: false })
}

/** `expectNoMarkerIn` for every file under `dir`. */
export function expectNoMarkerUnder(dir: string, marker: string): void {
  expectNoMarkerIn(filesUnder(dir), marker)
}
