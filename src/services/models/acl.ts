/** Wire shapes of ACL entries (docs/protocol.md §5); used for validation and the OpenAPI document. */
import { Type as T, type Static } from '@sinclair/typebox'
import { PublicKey } from './agent.ts'

const DateTime = T.String({ format: 'date-time' })

export const AclEntryType = T.Union([T.Literal('allow'), T.Literal('block')])
export type AclEntryType = Static<typeof AclEntryType>

export const AclPutInput = T.Object({ entry_type: AclEntryType }, { additionalProperties: false })

/** The collection form `PUT /v1/agents/{publicKey}/acl` (MRP's): the peer in the body. */
export const AclPutEntryInput = T.Object({ peer_key: PublicKey, entry_type: AclEntryType }, { additionalProperties: false })

export const AclEntry = T.Object({
  id: T.Integer(),
  owner_key: PublicKey,
  peer_key: PublicKey,
  entry_type: AclEntryType,
  created_at: DateTime,
  updated_at: DateTime,
})
export type AclEntryJson = Static<typeof AclEntry>

export const AclList = T.Array(AclEntry)
