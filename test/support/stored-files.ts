/** What a relay left on disk, for the checks that no plaintext of an encrypted message got there. */
import { expect } from 'bun:test'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'

/** Every file under `dir`, recursively, as full paths (none when it does not exist). */
export function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return []
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    return statSync(path).isDirectory() ? filesUnder(path) : [path]
  })
}

/** Asserts that there are files and that none holds `marker` (bytes, anywhere in the file). */
export function noMarkerIn(files: string[], marker: string): void {
  expect(files.length).toBeGreaterThan(0)
  for (const file of files) expect({ file, found: readFileSync(file).includes(marker) }).toEqual({ file, found: false })
}
