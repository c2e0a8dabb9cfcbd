/**
 * `relay inbox`: what is waiting for you, without taking it. The pending messages come over the
 * WebSocket's backlog and are never acknowledged here, so they stay on the relay until relay_ack (or
 * `relay listen`) handles them. With --hook it is a hook for hosts without channels: run on each prompt
 * (or stop) it prints only the messages it has not shown before, framed as another agent's data, and
 * remembers them in a small state file beside the key file.
 */
import { readFileSync, renameSync, writeFileSync } from 'node:fs'
import type { MessageJson } from '../../client/index.ts'
import { channelEvent } from '../../mcp/channel.ts'
import { PendingInbox } from '../../mcp/inbox.ts'
import type { CommandSpec } from './command.ts'

/** How long to wait for the relay's backlog before answering with what has come. */
const SYNC_WAIT_MS = 5000
/** Ids remembered as shown; only pending ones are kept, so this bounds a file nobody prunes. */
const MAX_REMEMBERED = 10_000

function readSeen(file: string): Set<string> {
  try {
    const ids = JSON.parse(readFileSync(file, 'utf8')) as unknown
    return new Set(Array.isArray(ids) ? ids.filter((x): x is string => typeof x === 'string') : [])
  } catch {
    return new Set()
  }
}

function writeSeen(file: string, ids: string[]): void {
  const temp = `${file}.tmp-${process.pid}`
  writeFileSync(temp, JSON.stringify(ids.slice(-MAX_REMEMBERED)), { mode: 0o600 })
  renameSync(temp, file)
}

/** The context a hook injects: one block per message, the text framed as data. */
export function hookText(messages: MessageJson[]): string {
  const head = `Agent Relay: ${messages.length} new message${messages.length === 1 ? '' : 's'} for you. Each stays in your inbox until relay_ack; answer with relay_reply.`
  return [head, ...messages.map((m) => channelEvent(m, undefined).content)].join('\n\n') + '\n'
}

export const inbox: CommandSpec = {
  name: 'inbox',
  summary: 'show the messages waiting for you, without taking them (--hook: each once, for a host hook)',
  description:
    'Lists the messages sent to you and not yet acknowledged. Nothing is acknowledged or marked delivered: they stay ' +
    'on the relay until an MCP bridge (relay_ack) or relay listen handles them. For hosts without channels, run it from ' +
    'a prompt hook: relay inbox --hook prints only the messages it has not printed before (remembered in KEYFILE.hook-seen, ' +
    'or --state FILE), framed as data from another agent, and nothing at all when there is nothing new. With --stop it ' +
    'prints a Stop hook decision instead ({"decision": "block", "reason": …}) when there are new messages, so the host ' +
    'takes another turn to handle them.',
  maxArgs: 0,
  flags: [
    { name: 'hook', help: 'print only messages not printed before, as context for a host hook' },
    { name: 'stop', help: 'with --hook: print a Stop hook decision (JSON) instead of text' },
    { name: 'state', value: 'FILE', help: 'where --hook remembers what it printed (default: KEYFILE.hook-seen)' },
  ],
  async run(ctx) {
    const client = ctx.client()
    const pending = new PendingInbox(client)
    pending.start()
    let messages: MessageJson[]
    try {
      const synced = await pending.whenSynced(SYNC_WAIT_MS)
      messages = pending.list({ limit: Number.MAX_SAFE_INTEGER }).messages
      if (!synced && !ctx.flags.hook) ctx.out.note(`the relay's backlog did not arrive within ${SYNC_WAIT_MS / 1000} s: ${pending.status().note ?? 'showing what came'}\n`)
    } finally {
      await pending.close()
    }
    if (!ctx.flags.hook) {
      if (ctx.json) return ctx.out.json({ messages, pending_count: messages.length })
      if (!messages.length) return ctx.out.text('no messages waiting\n')
      return ctx.out.text(hookText(messages))
    }
    const stateFile = ctx.flags.state ?? `${ctx.keyFile}.hook-seen`
    const seen = readSeen(stateFile)
    const fresh = messages.filter((m) => !seen.has(m.message_id))
    // remember what is still pending (acknowledged ones drop out), plus what is shown now
    writeSeen(
      stateFile,
      messages.map((m) => m.message_id).filter((id) => seen.has(id) || fresh.some((m) => m.message_id === id)),
    )
    if (!fresh.length) return
    if (ctx.flags.stop) return ctx.out.text(`${JSON.stringify({ decision: 'block', reason: hookText(fresh) })}\n`)
    ctx.out.text(hookText(fresh))
  },
}
