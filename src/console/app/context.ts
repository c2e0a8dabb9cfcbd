/** What every view of the console receives. */
import type { LiveSocket } from './api.ts'
import type { Identity } from './keys.ts'
import type { NameBook } from './names.ts'

export interface Ctx {
  id: Identity
  /** A status line in the live region (screen readers announce it). */
  notify(text: string, kind?: 'ok' | 'error'): void
  /** Shows another view; `arg` pre-fills it (a thread id, a recipient, a message id). */
  go(view: string, arg?: Record<string, string>): void
  socket: LiveSocket | null
  /** Messages pushed on the WebSocket (encrypted ones opened), newest last, by id. */
  inbox: Map<string, any>
  /** Ids of the messages sent from this page (the "what this relay can see" view reads them back). */
  sent: Set<string>
  /** Whether this key may call /v1/admin (checked when the key is loaded). */
  isAdmin: boolean
  /** Re-renders the inbox view when it is showing. */
  inboxChanged(): void
  /** Display names of agents, looked up once per key. */
  names: NameBook
}

export type View = (ctx: Ctx, root: HTMLElement, arg: Record<string, string>) => void | Promise<void>

/** Runs an action, reporting its failure in the live region instead of throwing. */
export async function attempt<T>(ctx: Ctx, what: string, run: () => Promise<T>): Promise<T | undefined> {
  try {
    return await run()
  } catch (err) {
    const e = err as { code?: string; message?: string }
    ctx.notify(`${what} failed: ${e.message ?? String(err)}${e.code ? ` (${e.code})` : ''}`, 'error')
    return undefined
  }
}
