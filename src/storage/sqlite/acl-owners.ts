import type { Database, Statement } from 'bun:sqlite'

/**
 * The owners that may have ACL entries, in memory, so that a send to an inbox without any entry (most
 * inboxes) skips the lookup of its sender's entry. The set may hold owners that have none left (entries
 * are added here when inserted, committed or not, and the set never shrinks while the relay runs); it
 * never misses an owner that has one.
 *
 * Another process's commit (`relay admin`, an sqlite3 shell) changes the writer connection's
 * `data_version`; the rows added since the last look are then read, by id (ids only grow, deleted ones
 * are never given again), so a checkpoint or a delete elsewhere costs one index probe, not a reload.
 * Reading `data_version` costs about as much as the lookup it saves, so it is read once per event-loop
 * turn: a commit made by another process while a turn runs counts as made after it.
 */
export class AclOwners {
  private owners: Set<string> | null = null
  private version = -1
  /** The highest entry id read from the table. */
  private lastId = 0
  /** `data_version` was read in this event-loop turn. */
  private checked = false
  private readonly uncheck = () => {
    this.checked = false
  }
  private readonly versionStmt: Statement<{ data_version: number }, []>
  private readonly addedStmt: Statement<{ id: number; owner: string }, [number]>
  /** Entry rows read from the table so far (start-up and after other processes' commits). */
  rowsRead = 0

  constructor(private readonly writer: Database) {
    this.versionStmt = writer.prepare('PRAGMA data_version')
    this.addedStmt = writer.prepare('SELECT id, owner_key AS owner FROM acl_entries WHERE id > ? ORDER BY id')
  }

  /** False only when `owner` certainly has no entry; true when it may have one. */
  mayHave(owner: string): boolean {
    if (this.checked && this.owners !== null) return this.owners.has(owner)
    const version = this.versionStmt.get()?.data_version ?? -1
    if (version !== this.version || this.owners === null) {
      // inside a transaction the writer sees rows that may yet be rolled back: no reading from there
      if (this.writer.inTransaction) return true
      const owners = (this.owners ??= new Set<string>())
      for (const row of this.addedStmt.iterate(this.lastId)) {
        owners.add(row.owner)
        this.lastId = row.id
        this.rowsRead++
      }
      this.version = version
    }
    this.checked = true
    setImmediate(this.uncheck)
    return this.owners.has(owner)
  }

  /** An entry of `owner` is being written (before its commit). */
  add(owner: string): void {
    this.owners?.add(owner)
  }
}
