import type { Database, Statement } from 'bun:sqlite'

/**
 * The owners that may have ACL entries, in memory, so that a send to an inbox without any entry (most
 * inboxes) skips the lookup of its sender's entry. The set may hold owners that have none left (entries
 * are added here when inserted, committed or not, and removed only by a reload); it never misses an owner
 * that has one. Another process's commit (`relay admin`, an sqlite3 shell) changes the writer connection's
 * `data_version`, and the set is read again from the table before it is trusted. Reading `data_version`
 * costs about as much as the lookup it saves, so it is read once per event-loop turn: a commit made by
 * another process while a turn runs counts as made after it.
 */
export class AclOwners {
  private owners: Set<string> | null = null
  private version = -1
  /** `data_version` was read in this event-loop turn. */
  private checked = false
  private readonly uncheck = () => {
    this.checked = false
  }
  private readonly versionStmt: Statement<{ data_version: number }, []>
  private readonly ownersStmt: Statement<{ owner: string }, []>

  constructor(private readonly writer: Database) {
    this.versionStmt = writer.prepare('PRAGMA data_version')
    this.ownersStmt = writer.prepare('SELECT DISTINCT owner_key AS owner FROM acl_entries')
  }

  /** False only when `owner` certainly has no entry; true when it may have one. */
  mayHave(owner: string): boolean {
    if (this.checked && this.owners !== null) return this.owners.has(owner)
    const version = this.versionStmt.get()?.data_version ?? -1
    if (version !== this.version || this.owners === null) {
      // inside a transaction the writer sees its own uncommitted deletes: no reload from there
      if (this.writer.inTransaction) return true
      const owners = new Set<string>()
      for (const row of this.ownersStmt.iterate()) owners.add(row.owner)
      this.owners = owners
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
