/**
 * What a read on the relay's reader connection costs right after the writer committed, with and
 * without SQLite's memory map. In WAL mode a connection whose read finds another connection's commit
 * drops its page cache and, with a memory map, unmaps the file; the read then maps it again. Under a
 * steady trickle of writes nearly every read is such a read (the ACL check of a send, a poll after a
 * message arrived). Prints figures, asserts nothing.
 *
 *   bun bench/sqlite-reader.ts
 *
 * Sizes (env): BENCH_READS 5000 (per setting), BENCH_DB_MIB "0,8,64" (rows checkpointed into the
 * database file first: what the map covers).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openRelayDatabase } from '../src/storage/sqlite/database.ts'
import { benchSize } from './lib.ts'

const READS = benchSize('BENCH_READS', 5000, 1000)
const SIZES_MIB = (process.env.BENCH_DB_MIB ?? '0,8,64').split(',').map(Number)

function run(mmapBytes: number, mib: number): { afterCommit: number; again: number } {
  const dir = mkdtempSync(join(tmpdir(), 'bench-reader-'))
  const { writer, reader } = openRelayDatabase(join(dir, 'relay.db'))
  try {
    writer.run('PRAGMA wal_autocheckpoint = 0')
    reader.run(`PRAGMA mmap_size = ${mmapBytes}`)
    const write = writer.prepare('INSERT OR REPLACE INTO relay_state (key, value) VALUES (?, ?)')
    const filler = 'x'.repeat(3000)
    for (let i = 0; i < (mib * 1024 * 1024) / 3000; i++) writer.transaction(() => write.run(`fill${i}`, filler))()
    writer.run('PRAGMA wal_checkpoint(TRUNCATE)')
    // the ACL check of a send: one lookup by the unique (owner, peer) index
    const read = reader.prepare('SELECT entry_type FROM acl_entries WHERE owner_key = ? AND peer_key = ?')
    let afterCommit = 0
    let again = 0
    for (let i = 0; i < READS; i++) {
      writer.transaction(() => write.run(`k${i % 50}`, `v${i}`))()
      let t = performance.now()
      read.get(`owner${i % 100}`, 'peer')
      afterCommit += performance.now() - t
      t = performance.now()
      read.get(`owner${i % 100}`, 'other')
      again += performance.now() - t
    }
    return { afterCommit: (afterCommit * 1000) / READS, again: (again * 1000) / READS }
  } finally {
    reader.close()
    writer.close()
    rmSync(dir, { recursive: true, force: true })
  }
}

console.log(`bench/sqlite-reader.ts — bun ${Bun.version}, ${READS} reads per setting; µs per read`)
for (const mib of SIZES_MIB) {
  for (const [name, bytes] of [['memory map 256 MiB', 256 * 1024 * 1024], ['no memory map', 0]] as const) {
    const r = run(bytes, mib)
    console.log(`  database of ${String(mib).padStart(3)} MiB, ${name.padEnd(18)}: first read after a commit ${r.afterCommit.toFixed(1)} µs, the next read ${r.again.toFixed(1)} µs`)
  }
}
