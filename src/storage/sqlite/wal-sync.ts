/**
 * Durability of commits in `fsync` mode: after a group commit (made with synchronous=NORMAL, which
 * writes the WAL but does not sync it), the WAL file is synced on the runtime's thread pool, so the
 * event loop keeps verifying and parsing requests meanwhile; the units of the group are answered once
 * the sync that started after their commit has returned. Syncs are coalesced: while one runs, every
 * commit made meanwhile waits for the single next one, so a sync covers as many groups as the disk
 * allows (one sync in flight, at most one waiting).
 *
 * An fsync of the WAL after a commit makes that commit durable exactly as synchronous=FULL would (the
 * commit's frames, the WAL header and the file's size are on disk); checkpoints sync the database file
 * themselves before the WAL is reused.
 */
import { closeSync, fsync, fsyncSync, openSync } from 'node:fs'
import { dirname } from 'node:path'

export class WalSync {
  private fd: number | null = null
  private running: Promise<void> | null = null
  private queued: Promise<void> | null = null
  /** Syncs made (health figures). */
  syncs = 0

  constructor(private readonly databasePath: string) {}

  /** Resolves once a sync that started after this call has returned: every commit made before is on disk. */
  sync(): Promise<void> {
    if (this.queued) return this.queued
    if (!this.running) return (this.running = this.launch())
    const next = this.running
      .catch(() => {})
      .then(() => {
        this.queued = null
        return (this.running = this.launch())
      })
    this.queued = next
    return next
  }

  private async launch(): Promise<void> {
    await null // `running` is set before this settles
    try {
      const fd = this.open()
      await new Promise<void>((resolve, reject) => fsync(fd, (err) => (err ? reject(err) : resolve())))
      this.syncs++
    } finally {
      this.running = null
    }
  }

  /** The WAL, opened once (it exists after the first commit); its directory entry is synced then too. */
  private open(): number {
    if (this.fd !== null) return this.fd
    const fd = openSync(`${this.databasePath}-wal`, 'r')
    const dir = openSync(dirname(this.databasePath), 'r')
    try {
      fsyncSync(dir)
    } finally {
      closeSync(dir)
    }
    this.fd = fd
    return fd
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd)
    this.fd = null
  }
}
