/**
 * Access control (docs/protocol.md §5) and the inbox-policy decision of docs/protocol.md §4.3 step 6, which every send path
 * (HTTP and WebSocket) goes through.
 */
import { PUBLIC_KEY_PATTERN } from '../auth/keys.ts'
import { RelayError, badRequest } from '../errors.ts'
import type { Clock } from '../lib/clock.ts'
import { iso } from '../lib/clock.ts'
import type { AclRecord } from './models/records.ts'
import type { AclStore, Storage } from './ports.ts'
import { AclPutEntryInput, AclPutInput, type AclEntryJson, type AclEntryType } from './models/acl.ts'
import { validate } from './validate.ts'

/** docs/protocol.md §5 / §12. */
export const MAX_ACL_ENTRIES = 10_000
const KEY_PATTERN = PUBLIC_KEY_PATTERN

export type InboxPolicy = 'open' | 'closed' | 'allowlist' | 'blocklist'

/** The one serializer for ACL entries. */
export function aclEntryToJson(row: AclRecord): AclEntryJson {
  return {
    id: row.id,
    owner_key: row.ownerKey,
    peer_key: row.peerKey,
    entry_type: row.entryType,
    created_at: iso(row.createdAt),
    updated_at: iso(row.updatedAt),
  }
}

export class AclService {
  constructor(
    private readonly storage: Storage,
    private readonly clock: Clock,
    private readonly maxEntries: number = MAX_ACL_ENTRIES,
  ) {}

  /**
   * Whether `recipient`'s inbox policy lets `senderKey` in (docs/protocol.md §4.3 step 6): `open` accepts all,
   * `closed` none, `allowlist` only senders with an `allow` entry, `blocklist` all but those with a
   * `block` entry. Self-sends are decided by the caller, before this.
   */
  async admits(recipientKey: string, policy: InboxPolicy, senderKey: string, acl: AclStore = this.storage.acl): Promise<boolean> {
    switch (policy) {
      case 'open':
        return true
      case 'closed':
        return false
      case 'allowlist':
        return (await acl.entryTypeFor(recipientKey, senderKey)) === 'allow'
      case 'blocklist':
        return (await acl.entryTypeFor(recipientKey, senderKey)) !== 'block'
    }
  }

  /**
   * Entries of the owner, newest first, optionally of one type: `entry_type=allow|block`, or `type=`
   * as MRP clients also write it (both given must agree). `query` is the raw query string map.
   */
  async list(caller: string, owner: string, query: Record<string, string | string[]> = {}): Promise<AclRecord[]> {
    this.assertOwner(caller, owner)
    const fields: Record<string, string> = Object.create(null) // `__proto__` is a parameter name like any other
    for (const [name, value] of Object.entries(query)) {
      if (name !== 'entry_type' && name !== 'type') fields[name] = 'unknown parameter'
      else if (value !== 'allow' && value !== 'block') fields[name] = 'must be allow or block'
    }
    if (query.entry_type !== undefined && query.type !== undefined && query.entry_type !== query.type) fields.type = 'must agree with entry_type'
    if (Object.keys(fields).length) throw badRequest('Invalid query parameters', fields)
    return this.storage.acl.list(owner, (query.entry_type ?? query.type) as AclEntryType | undefined)
  }

  async get(caller: string, owner: string, peer: string): Promise<AclRecord> {
    this.assertOwner(caller, owner)
    this.assertPeer(peer)
    const row = await this.storage.acl.find(owner, peer)
    if (!row) throw new RelayError('not_found', 'No ACL entry for this peer')
    return row
  }

  /** Creates or changes the entry for `peer`; `created` tells 201 from 200. At most 10,000 per owner. */
  async put(caller: string, owner: string, peer: string, body: unknown): Promise<{ row: AclRecord; created: boolean }> {
    this.assertOwner(caller, owner)
    this.assertPeer(peer)
    const { entry_type } = validate(AclPutInput, body ?? undefined)
    const now = this.clock.now()
    return this.storage.transaction(async ({ acl }) => {
      const existing = await acl.find(owner, peer)
      if (existing) {
        if (existing.entryType !== entry_type) {
          await acl.setType(existing.id, entry_type, now)
          existing.entryType = entry_type
          existing.updatedAt = now
        }
        return { row: existing, created: false }
      }
      if ((await acl.count(owner)) >= this.maxEntries) {
        throw new RelayError('unprocessable_entity', `An agent can have at most ${this.maxEntries} ACL entries`, {
          limit: this.maxEntries,
        })
      }
      return { row: await acl.insert(owner, peer, entry_type, now), created: true }
    })
  }

  /** The collection form of put (`PUT /v1/agents/{publicKey}/acl` with `{peer_key, entry_type}`). */
  async putEntry(caller: string, owner: string, body: unknown): Promise<{ row: AclRecord; created: boolean }> {
    this.assertOwner(caller, owner)
    const { peer_key, entry_type } = validate(AclPutEntryInput, body ?? undefined)
    return this.put(caller, owner, peer_key, { entry_type })
  }

  async delete(caller: string, owner: string, peer: string): Promise<void> {
    this.assertOwner(caller, owner)
    this.assertPeer(peer)
    if (!(await this.storage.acl.delete(owner, peer))) throw new RelayError('not_found', 'No ACL entry for this peer')
  }

  private assertOwner(caller: string, owner: string): void {
    if (caller !== owner) throw new RelayError('forbidden', 'Only the agent itself may read or change its ACL')
  }

  private assertPeer(peer: string): void {
    if (!KEY_PATTERN.test(peer)) throw badRequest('Invalid path parameters', { peerKey: 'must be a public key: 43 base64url characters, canonical (unused trailing bits zero)' })
  }
}
