/** Tools about agents: who am I, my profile, finding others and reading their profiles. */
import type { McpServer } from '@modelcontextprotocol/server'
import { z } from 'zod'
import type { Bridge } from '../bridge.ts'
import { Agent, Capability, Connection, Cursor, DiscoveryEntry, PublicKey, Tag } from '../schemas.ts'
import { DESTROYS, READS, defineTool } from '../tool.ts'
import { EncryptionFacts, encryptionFacts } from '../encryption-facts.ts'

export function registerAgentTools(server: McpServer, bridge: Bridge): void {
  defineTool(server, 'relay_whoami', {
    title: 'Who am I on the relay',
    description:
      "This agent's public key (its address: give it to others so they can write to you), its profile on the relay, " +
      'the relay URL, how the bridge is receiving, what waits in the inbox, which local directories the file tools may use, ' +
      'and whether messages are end-to-end encrypted.',
    input: {},
    output: {
      public_key: z.string(),
      relay_url: z.string(),
      agent: Agent,
      pending_count: z.number().int(),
      inbox: z.object({
        pending_count: z.number().int().describe('received and not yet acknowledged'),
        oldest_pending_at: z.string().nullable(),
        senders: z.number().int().describe('distinct senders among the pending messages'),
        rule: z.string(),
      }),
      files: z.object({
        directories: z.array(z.string()).describe('the only places relay_upload, relay_send attachments and relay_download may read or write'),
        download_dir: z.string(),
        overwrite_allowed: z.boolean(),
      }),
      encryption: EncryptionFacts,
      connection: Connection,
    },
    annotations: READS,
    run: async () => {
      await bridge.inbox.whenSynced()
      const pending = bridge.inbox.list({ limit: Number.MAX_SAFE_INTEGER }).messages
      const agent = await bridge.client.getAgent()
      return {
        public_key: bridge.publicKey,
        relay_url: bridge.relayUrl,
        agent,
        pending_count: pending.length,
        inbox: {
          pending_count: pending.length,
          oldest_pending_at: pending[0]?.created_at ?? null,
          senders: new Set(pending.map((m) => m.sender_key)).size,
          rule: 'A message stays in the inbox, and comes back after a restart, until relay_ack; reading never removes it.',
        },
        files: { directories: bridge.files.roots, download_dir: bridge.files.downloadDir, overwrite_allowed: bridge.files.allowOverwrite },
        encryption: encryptionFacts(bridge, agent.metadata),
        connection: bridge.inbox.status(),
      }
    },
  })

  defineTool(server, 'relay_update_profile', {
    title: 'Update my profile',
    description:
      'Changes your profile. Only the fields given change, and each replaces that field whole (capabilities replaces the whole list). ' +
      'visibility public makes you findable with relay_discover; inbox_policy decides who may write to you: open (anyone), ' +
      'closed (no one), allowlist (only peers you allow with relay_acl_set), blocklist (anyone but peers you block; the default).',
    input: {
      display_name: z.string().max(256).nullable().optional().describe('your name (null clears it)'),
      visibility: z.enum(['public', 'private']).optional(),
      inbox_policy: z.enum(['open', 'closed', 'allowlist', 'blocklist']).optional(),
      metadata: z.record(z.string(), z.unknown()).optional().describe('any JSON object (at most 16 KiB)'),
      capabilities: z.array(Capability).max(20).optional().describe('what you can do: name, description, tags, input_schema, version'),
    },
    output: { agent: Agent },
    annotations: DESTROYS,
    run: async (patch) => ({ agent: await bridge.client.updateProfile(patch) }),
  })

  defineTool(server, 'relay_discover', {
    title: 'Find agents',
    description:
      'Public, active agents, most recently active first, matched by capability tags (all must match), words (each matching as a prefix in ' +
      'capability names, descriptions and names), part of the name, or recent activity. With no filter, every public agent.',
    input: {
      tags: z.array(Tag).max(20).optional().describe('capability tags; an agent must have all of them'),
      q: z.string().max(512).optional().describe('words to search for'),
      name: z.string().max(256).optional().describe('part of the display name'),
      active_since: z.string().optional().describe('RFC 3339 time: only agents active since then'),
      limit: z.number().int().min(1).max(100).optional().describe('page size (default 20)'),
      cursor: Cursor.optional(),
    },
    output: { agents: z.array(DiscoveryEntry), has_more: z.boolean(), next_cursor: z.string().nullable() },
    annotations: { ...READS, openWorldHint: true },
    run: async ({ tags, ...rest }) => ({ ...(await bridge.client.discover({ ...rest, tag: tags })) }),
  })

  defineTool(server, 'relay_capabilities', {
    title: 'Capability tags in use',
    description: 'The capability tags of public, active agents with how many agents have each, most used first: what you can search for with relay_discover.',
    input: {
      prefix: z.string().max(64).optional().describe('only tags starting with it'),
      limit: z.number().int().min(1).max(1000).optional().describe('at most this many tags (default 1000)'),
    },
    output: { capabilities: z.array(z.object({ tag: z.string(), agent_count: z.number().int() })) },
    annotations: { ...READS, openWorldHint: true },
    run: async (query) => ({ capabilities: await bridge.client.capabilities(query) }),
  })

  defineTool(server, 'relay_get_agent', {
    title: "An agent's profile",
    description: "Another agent's profile by public key: name, visibility, inbox policy, metadata and full capability definitions (with input_schema).",
    input: { public_key: PublicKey },
    output: { agent: Agent },
    annotations: { ...READS, openWorldHint: true },
    run: async ({ public_key }) => ({ agent: await bridge.client.getAgent(public_key) }),
  })
}

