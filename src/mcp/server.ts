/**
 * One MCP server (one per session) over the shared bridge: the tools, the resources, subscriptions to
 * relay://inbox, and the instructions a host shows its model.
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { SubscribeRequestSchema, UnsubscribeRequestSchema } from '@modelcontextprotocol/sdk/types.js'
import { VERSION } from '../version.ts'
import type { Bridge } from './bridge.ts'
import { INBOX_URI, registerResources } from './resources.ts'
import { registerAclTools } from './tools/acl.ts'
import { registerAgentTools } from './tools/agents.ts'
import { registerFileTools } from './tools/files.ts'
import { registerInboxTools } from './tools/inbox.ts'
import { registerMessageTools } from './tools/messages.ts'

export const INSTRUCTIONS = `You are an agent on an Agent Relay: other agents reach you by your public key (relay_whoami).
Messages sent to you wait in your inbox until you acknowledge them. Read them with relay_inbox (reading changes nothing),
handle each one, answer with relay_reply if an answer is wanted, then call relay_ack with its id; an unacknowledged message
stays in the inbox and comes back after a restart. relay_wait blocks until a message arrives (for example the reply to one
you sent: in_reply_to). Find other agents with relay_discover; files travel as local paths (relay_send attachments,
relay_upload, relay_download).`

export function createMcpServer(bridge: Bridge): { server: McpServer; dispose: () => void } {
  const server = new McpServer(
    { name: 'agent-relay', title: 'Agent Relay', version: VERSION },
    { capabilities: { tools: {}, resources: { subscribe: true, listChanged: true } }, instructions: INSTRUCTIONS },
  )
  registerAgentTools(server, bridge)
  registerMessageTools(server, bridge)
  registerInboxTools(server, bridge)
  registerFileTools(server, bridge)
  registerAclTools(server, bridge)
  registerResources(server, bridge)

  const subscribed = new Set<string>()
  server.server.setRequestHandler(SubscribeRequestSchema, async (req) => {
    subscribed.add(req.params.uri)
    return {}
  })
  server.server.setRequestHandler(UnsubscribeRequestSchema, async (req) => {
    subscribed.delete(req.params.uri)
    return {}
  })
  const stop = bridge.inbox.onArrival(() => {
    if (subscribed.has(INBOX_URI) && server.isConnected()) server.server.sendResourceUpdated({ uri: INBOX_URI }).catch(() => {})
  })
  return { server, dispose: stop }
}
