/**
 * The client's wire types (src/client/types.ts) are its own, so that the installable package carries no
 * server code. These checks tie them to the server's shapes: `tsc --noEmit` fails when either side
 * changes a field the other does not. Answers must match exactly; what the client sends must be
 * something the server accepts.
 */
import { describe, expect, test } from 'bun:test'
import type { Static } from '@sinclair/typebox'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import type * as Wire from '../../src/client/types.ts'
import type { AgentJson, CapabilityJson } from '../../src/services/agents.ts'
import type { CapabilityCatalogJson, DiscoverResultJson, DiscoveryEntryJson } from '../../src/services/discovery.ts'
import type { AclEntry, AclEntryType } from '../../src/services/models/acl.ts'
import type { AgentPatch } from '../../src/services/models/agent.ts'
import type { BlobJson } from '../../src/services/models/blob.ts'
import type {
  AttachmentInput,
  AttachmentJson,
  MessageJson,
  MessagePageJson,
  MessageStatusJson,
  PollQuery,
  SendMessageInput,
  SendResultJson,
} from '../../src/services/models/message.ts'
import type { WebhookConfigJson, WebhookDeliveryJson } from '../../src/services/models/webhook.ts'

/** true only when A and B are the same type (not merely assignable one way). */
type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false
/** true when every A is a B. */
type Fits<A, B> = [A] extends [B] ? true : false
const same = <A, B>(ok: Same<A, B>) => ok
const fits = <A, B>(ok: Fits<A, B>) => ok

describe('client wire types', () => {
  test('answers: the client reads exactly what the server writes', () => {
    const checks = [
      same<Wire.AgentJson, AgentJson>(true),
      same<Wire.CapabilityJson, CapabilityJson>(true),
      same<Wire.DiscoveryEntryJson, DiscoveryEntryJson>(true),
      same<Wire.DiscoverResultJson, DiscoverResultJson>(true),
      same<Wire.CapabilityCatalogJson, CapabilityCatalogJson>(true),
      same<Wire.AttachmentJson, AttachmentJson>(true),
      same<Wire.MessageJson, MessageJson>(true),
      same<Wire.MessagePageJson, MessagePageJson>(true),
      same<Wire.MessageStatusJson, MessageStatusJson>(true),
      same<Wire.SendResultJson, SendResultJson>(true),
      same<Wire.AclEntryJson, Static<typeof AclEntry>>(true),
      same<Wire.AclEntryType, AclEntryType>(true),
      same<Wire.BlobJson, BlobJson>(true),
      same<Wire.WebhookConfigJson, WebhookConfigJson>(true),
      same<Wire.WebhookDeliveryJson, WebhookDeliveryJson>(true),
    ]
    expect(checks.every(Boolean)).toBe(true)
  })

  test('requests: whatever the client may send, the server accepts', () => {
    const checks = [
      fits<Wire.SendMessageInput, SendMessageInput>(true),
      fits<Wire.AttachmentInput, AttachmentInput>(true),
      fits<Wire.AgentPatchInput, Static<typeof AgentPatch>>(true),
      fits<Wire.PollQuery, PollQuery>(true),
    ]
    expect(checks.every(Boolean)).toBe(true)
  })

  test('no client module imports server code', () => {
    const dir = join(import.meta.dir, '../../src/client')
    for (const file of ['index.ts', 'types.ts', 'transport.ts', 'socket.ts', 'blob-source.ts', 'blob-file.ts', 'webhook-verify.ts']) {
      const imports = [...readFileSync(join(dir, file), 'utf8').matchAll(/from '([^']+)'/g)].map((m) => m[1])
      const server = imports.filter((i) => /\/(services|storage|http|delivery|features|jobs|config|blobs|metrics)\//.test(i) || i.endsWith('/relay.ts') || i.endsWith('/errors.ts'))
      expect([file, server]).toEqual([file, []])
    }
  })
})
