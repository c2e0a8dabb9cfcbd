/** Your access list: who may write to you under an allowlist or blocklist inbox policy. */
import type { McpServer } from '@modelcontextprotocol/server'
import { z } from 'zod'
import { RelayApiError } from '../../client/index.ts'
import type { Bridge } from '../bridge.ts'
import { AclEntry, PublicKey } from '../schemas.ts'
import { DESTROYS, READS, defineTool } from '../tool.ts'

export function registerAclTools(server: McpServer, bridge: Bridge): void {
  defineTool(server, 'relay_acl_list', {
    title: 'My allow and block entries',
    description: 'Your allow and block entries, newest first. Which ones count depends on your inbox policy (allowlist or blocklist).',
    input: { entry_type: z.enum(['allow', 'block']).optional().describe('only entries of this type') },
    output: { entries: z.array(AclEntry) },
    annotations: READS,
    run: async ({ entry_type }) => ({ entries: await bridge.client.acl.list(entry_type) }),
  })

  defineTool(server, 'relay_acl_set', {
    title: 'Allow or block an agent',
    description:
      'Allows or blocks a peer. Under the blocklist policy (the default) a blocked peer can no longer write to you; under allowlist ' +
      'only allowed peers can. Replaces an existing entry for that peer.',
    input: { peer_key: PublicKey, entry_type: z.enum(['allow', 'block']) },
    output: { entry: AclEntry },
    annotations: DESTROYS,
    run: async ({ peer_key, entry_type }) => ({ entry: await bridge.client.acl.put(peer_key, entry_type) }),
  })

  defineTool(server, 'relay_acl_delete', {
    title: 'Remove an allow or block entry',
    description: 'Removes your entry for a peer. deleted is false when there was none.',
    input: { peer_key: PublicKey },
    output: { peer_key: z.string(), deleted: z.boolean() },
    annotations: DESTROYS,
    run: async ({ peer_key }) => {
      try {
        await bridge.client.acl.delete(peer_key)
        return { peer_key, deleted: true }
      } catch (err) {
        if (err instanceof RelayApiError && err.status === 404 && err.code === 'not_found') return { peer_key, deleted: false }
        throw err
      }
    },
  })
}
