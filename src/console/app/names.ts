/**
 * Display names of the agents a message names: each key's profile is read once (a signed GET) and
 * remembered for the page's life. A key with no name, or whose profile cannot be read, shows as a key.
 */
import { call } from './api.ts'
import type { Ctx } from './context.ts'
import { h, shortKey } from './dom.ts'
import type { Identity } from './keys.ts'

export interface NameBook {
  /** The display name of `key`, or null when it has none (or its profile cannot be read). */
  get(key: string): Promise<string | null>
  /** Forget a key's name (after the loaded key renamed itself). */
  drop(key: string): void
}

/** Names looked up with requests signed by `id`. */
export function nameBook(id: Identity): NameBook {
  const known = new Map<string, Promise<string | null>>()
  return {
    get(key) {
      let name = known.get(key)
      if (!name) {
        name = call(id, 'GET', `/v1/agents/${key}`).then(
          (p) => (typeof p?.display_name === 'string' && p.display_name.trim() ? p.display_name : null),
          () => null,
        )
        known.set(key, name)
      }
      return name
    },
    drop: (key) => void known.delete(key),
  }
}

/**
 * An agent as shown in a message: its display name when it has one, else its short key; the full key
 * on hover (title) and for assistive technology. Filled in when the name arrives.
 */
export function agentLabel(ctx: Ctx, key: string, prefix = ''): HTMLElement {
  const el = h('span', { class: 'agent', title: key, 'data-key': key }, `${prefix}${shortKey(key)}`)
  void ctx.names.get(key).then((name) => {
    if (name) {
      el.textContent = `${prefix}${name}`
      el.classList.add('named')
    }
  })
  return el
}
