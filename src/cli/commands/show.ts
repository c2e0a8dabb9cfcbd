/** Human-readable renderings shared by several commands. */
import type { AgentJson, MessageEncryptionJson } from '../../client/index.ts'
import { fields } from '../format.ts'
import type { CommandContext } from './command.ts'

export function printAgent(ctx: CommandContext, a: AgentJson, extra: [string, unknown][] = []): void {
  const caps = a.capabilities ?? []
  ctx.out.text(
    fields([
      ['public key', a.public_key],
      ...extra,
      ['display name', a.display_name ?? '(none)'],
      ['status', a.status],
      ['visibility', a.visibility],
      ['inbox policy', a.inbox_policy],
      ['created', a.created_at],
      ['last active', a.last_active_at],
      ['metadata', a.metadata ?? {}],
      ['capabilities', caps.length === 0 ? '(none)' : caps.map((c) => c.name).join(', ')],
    ]),
  )
  for (const c of caps) {
    ctx.out.text(`  - ${c.name}${c.version ? ` (${c.version})` : ''}${c.tags?.length ? ` [${c.tags.join(', ')}]` : ''}${c.description ? `: ${c.description}` : ''}\n`)
  }
}

/** A short form of a key for tables: the first 10 characters, or "me". */
export function shortKey(key: string | undefined, me?: string): string {
  if (!key) return '-'
  if (key === me) return 'me'
  return key.slice(0, 10) + '…'
}

/** What the client found decrypting a message, as people read it; undefined for a plaintext one. */
export function encryptionNote(m: { encryption?: MessageEncryptionJson }): string | undefined {
  const e = m.encryption
  if (!e) return undefined
  if (e.error) return `encrypted (v${e.version}), NOT decrypted: ${e.error.reason} — ${e.error.message}`
  if (!e.sender_verified) return `encrypted (v${e.version}), decrypted; signed by ${e.signer_key ?? 'another key'}, NOT by the sender`
  return `encrypted (v${e.version}), decrypted, sender verified`
}

/** One line of a message for lists: its body, behind a lock when it came encrypted. */
export function messagePreview(m: { body?: unknown; encryption?: MessageEncryptionJson }, width = 60): string {
  const e = m.encryption
  if (!e) return preview(m.body, width)
  if (e.error) return `[not decrypted: ${e.error.reason}]`
  return (e.sender_verified ? '🔒 ' : '🔒? ') + preview(m.body, width - 3)
}

/** One line of a message body for lists. */
export function preview(body: unknown, width = 60): string {
  if (body === undefined) return ''
  const text = typeof body === 'string' ? body : JSON.stringify(body)
  const flat = text.replace(/\s+/g, ' ')
  return flat.length > width ? flat.slice(0, width - 1) + '…' : flat
}

/** Follows next_cursor until has_more is false when `all`; otherwise one page. */
export async function pages<T>(
  all: boolean,
  fetchPage: (cursor: string | undefined) => Promise<{ has_more: boolean; next_cursor: string | null } & T>,
  first?: string,
): Promise<({ has_more: boolean; next_cursor: string | null } & T)[]> {
  const out = []
  let cursor = first
  for (;;) {
    const page = await fetchPage(cursor)
    out.push(page)
    if (!all || !page.has_more || !page.next_cursor) return out
    cursor = page.next_cursor
  }
}
