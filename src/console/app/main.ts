/**
 * The web console: a page of the relay that acts as an agent with a key held in this browser. Every
 * request is signed here; the key never leaves the browser. Views are plain DOM, switched by the
 * navigation (and the URL hash, so the back button and bookmarks work).
 */
import { ApiError, LiveSocket, call } from './api.ts'
import type { Ctx, View } from './context.ts'
import { field, fill, h, lockIcon, shortKey } from './dom.ts'
import { forgetIdentity, generateIdentity, identityFromFile, loadIdentity, saveIdentity, type Identity } from './keys.ts'
import { nameBook } from './names.ts'
import { adminView } from './views/admin.ts'
import { discoverView, profileView } from './views/directory.ts'
import { downloadsView, inboxView, sendView, statusView, threadsView } from './views/messages.ts'
import { visibilityView } from './views/visibility.ts'
import { declareSupport, NO_AGREEMENT_KEY, openForDisplay } from './e2e.ts'

const VIEWS: { name: string; label: string; view: View; admin?: boolean }[] = [
  { name: 'inbox', label: 'Inbox', view: inboxView },
  { name: 'threads', label: 'Threads', view: threadsView },
  { name: 'send', label: 'Send', view: sendView },
  { name: 'status', label: 'Status', view: statusView },
  { name: 'downloads', label: 'Downloads', view: downloadsView },
  { name: 'discover', label: 'Discover', view: discoverView },
  { name: 'profile', label: 'Profile', view: profileView },
  { name: 'visibility', label: 'What the relay sees', view: visibilityView },
  { name: 'admin', label: 'Operator', view: adminView, admin: true },
]

const main = document.getElementById('main') as HTMLElement
const nav = document.getElementById('nav') as HTMLElement
const keyBar = document.getElementById('key') as HTMLElement
const live = document.getElementById('live') as HTMLElement
const connection = document.getElementById('connection') as HTMLElement
/** A note about the key under the navigation (one that cannot decrypt says so there). */
const keyNote = h('div', { class: 'key-note' })
main.before(keyNote)

function notify(text: string, kind: 'ok' | 'error' = 'ok'): void {
  fill(live, h('p', { class: kind, role: kind === 'error' ? 'alert' : 'status' }, text))
}

let ctx: Ctx | null = null

function showKeySetup(): void {
  fill(keyNote)
  fill(nav)
  fill(keyBar)
  fill(connection)
  const file = h('input', { type: 'file', name: 'keyfile', accept: '.key,.json,application/json,application/octet-stream,text/plain' })
  const text = h('textarea', { name: 'keytext', rows: 4, spellcheck: 'false', autocomplete: 'off' })
  const useText = async (content: string | Uint8Array) => {
    try {
      await start(await identityFromFile(content))
    } catch (err) {
      notify(`Import failed: ${(err as Error).message}`, 'error')
    }
  }
  fill(
    main,
    h('h2', {}, 'Your key'),
    h(
      'p',
      {},
      'The console acts as an agent with an Ed25519 key held in this browser. The key is never sent: every request is signed here. ' +
        'The browser keeps it as a key that can sign but that no page, this one included, can read back. ' +
        'Make a new key, or import the key file of an agent: the JSON file that relay keygen writes, or the seed file of an MRP tool (raw 32 bytes, hex or base64).',
    ),
    h('button', { type: 'button', id: 'generate', onclick: async () => start(await generateIdentity()) }, 'Generate a new key'),
    h(
      'form',
      { onsubmit: (e: Event) => (e.preventDefault(), void useText(text.value)) },
      h('h3', {}, 'Import a key file'),
      field('Key file', file),
      field('…or paste its content', text),
      h('button', { type: 'submit' }, 'Import'),
    ),
  )
  file.addEventListener('change', async () => {
    const f = file.files?.[0]
    // the bytes as they are: an MRP tool's key file may be the raw 32-byte seed
    if (f) await useText(new Uint8Array(await f.arrayBuffer()))
  })
}

function exportKey(id: Identity): void {
  if (!id.file) return
  const url = URL.createObjectURL(new Blob([id.file], { type: 'application/json' }))
  const a = h('a', { href: url, download: `relay-${id.publicKey.slice(0, 8)}.key` })
  document.body.appendChild(a)
  a.click()
  a.remove()
  setTimeout(() => URL.revokeObjectURL(url), 60_000)
}

/**
 * The one moment the key file exists: right after a key is generated here or moved from an older
 * console's localStorage. Resolves once the user has exported it or chosen to go on without a copy.
 * (An imported key needs no offer: the user has its file.)
 */
function offerExport(id: Identity): Promise<void> {
  return new Promise((resolve) => {
    const migrated = id.origin === 'migrated'
    fill(
      main,
      h('h2', {}, migrated ? 'Your key has moved' : 'Save a copy of your new key'),
      h(
        'p',
        {},
        migrated
          ? 'Earlier versions of the console kept the key readable in localStorage. The browser now holds it as a key that can sign but that no page can read back, and the readable copy is deleted. '
          : 'This key exists only in this browser, which holds it as a key that can sign but that no page, this one included, can read back. ',
        'This is the only time it can be exported: save the key file to use this agent elsewhere (relay --key FILE) or to keep it should the browser data be cleared.',
      ),
      h('p', {}, 'Public key ', h('code', { title: id.publicKey }, id.publicKey)),
      h(
        'div',
        { class: 'actions' },
        h('button', { type: 'button', id: 'export-key', onclick: () => (exportKey(id), notify('Key file saved'), resolve()) }, 'Export key file'),
        h(
          'button',
          {
            type: 'button',
            class: 'secondary',
            onclick: () => {
              if (confirm('Go on without a copy? The key cannot be exported later; if this browser data is cleared, the agent is gone for good.')) resolve()
            },
          },
          'Continue without a copy',
        ),
      ),
    )
    main.focus({ preventScroll: true })
  })
}

async function start(id: Identity): Promise<void> {
  if (id.origin === 'generated' || id.origin === 'imported') {
    try {
      await saveIdentity(id)
    } catch (err) {
      notify(`Keeping the key in this browser failed (it works for this page only): ${(err as Error).message}`, 'error')
    }
  }
  ctx?.socket?.close()
  ctx = null
  if (id.file && id.origin !== 'imported') {
    fill(nav)
    fill(keyBar)
    await offerExport(id)
  }
  // the raw key leaves memory: from here on only the non-extractable CryptoKey signs
  delete id.file
  const c: Ctx = {
    id,
    notify,
    go: (view, arg = {}) => {
      const query = new URLSearchParams(arg).toString()
      const hash = `#${view}${query ? `?${query}` : ''}`
      // the same hash again fires no hashchange: show the view anew (Refresh)
      if (location.hash === hash) route()
      else location.hash = hash
    },
    socket: null,
    inbox: new Map(),
    sent: new Set(),
    isAdmin: false,
    inboxChanged: () => {},
    names: nameBook(id),
  }
  ctx = c
  // the first request also creates the agent (and shows whether the relay admits this key)
  let profile: any = null
  try {
    profile = await call(id, 'GET', `/v1/agents/${id.publicKey}`)
  } catch (err) {
    notify(`The relay refused this key: ${(err as Error).message}`, 'error')
  }
  // the first time a key that can decrypt is used here, its profile says so (senders then encrypt to it)
  try {
    if (await declareSupport(id, profile)) notify('Your profile now declares that you read end-to-end encrypted messages')
  } catch (err) {
    notify(`Declaring encryption support failed: ${(err as Error).message}`, 'error')
  }
  // operator access: the cheapest call behind the same check (the stats would scan every table)
  try {
    await call(id, 'GET', '/v1/admin/errors?limit=1')
    c.isAdmin = true
  } catch (err) {
    if (!(err instanceof ApiError && err.status === 403)) notify(`Checking operator access failed: ${(err as Error).message}`, 'error')
  }
  fill(
    keyBar,
    h('span', {}, 'Key ', h('code', { id: 'public-key', title: id.publicKey }, shortKey(id.publicKey))),
    h('button', { type: 'button', onclick: () => navigator.clipboard?.writeText(id.publicKey).then(() => notify('Public key copied')) }, 'Copy'),
    h(
      'button',
      {
        type: 'button',
        onclick: async () => {
          if (!confirm('Forget this key? Unless you exported it or imported it from a file, it is gone for good.')) return
          try {
            await forgetIdentity()
          } catch (err) {
            return notify(`Forgetting the key failed: ${(err as Error).message}`, 'error')
          }
          c.socket?.close()
          ctx = null
          location.hash = ''
          showKeySetup()
        },
      },
      'Forget',
    ),
  )
  // a key stored by an earlier console: it signs, but cannot decrypt until its file is imported again
  fill(keyNote, id.agreementKey ? null : h('p', { class: 'no-decrypt', role: 'note' }, lockIcon(), ' ', NO_AGREEMENT_KEY))
  let opening = Promise.resolve()
  c.socket = new LiveSocket(id, {
    onMessage: (pushed) => {
      // opened one after the other, so the inbox keeps the order they arrived in
      opening = opening.then(async () => {
        if (ctx !== c) return
        const m = await openForDisplay(id, pushed)
        if (ctx !== c) return
        c.inbox.set(m.message_id, m)
        c.inboxChanged()
        void c.names.get(m.sender_key).then((name) => ctx === c && notify(`New message from ${name ?? shortKey(m.sender_key)}${m.lock && !m.lock.error ? ' (encrypted)' : ''}`))
      })
    },
    onState: (state, detail) => {
      if (ctx !== c) return
      fill(connection, h('span', { class: `dot ${state}` }), state === 'live' ? 'live' : state === 'connecting' ? 'connecting…' : `offline${detail ? `: ${detail}` : ''}`)
    },
  })
  renderNav()
  route()
}

function renderNav(): void {
  const current = currentView().name
  fill(
    nav,
    h(
      'ul',
      {},
      VIEWS.filter((v) => !v.admin || ctx?.isAdmin).map((v) =>
        h('li', {}, h('a', { href: `#${v.name}`, 'aria-current': v.name === current ? 'page' : null, 'data-view': v.name }, v.label)),
      ),
    ),
  )
}

function currentView(): { name: string; arg: Record<string, string> } {
  const [name, query] = location.hash.slice(1).split('?')
  return { name: VIEWS.some((v) => v.name === name) ? name : 'inbox', arg: Object.fromEntries(new URLSearchParams(query ?? '')) }
}

function route(): void {
  if (!ctx) return
  const { name, arg } = currentView()
  const spec = VIEWS.find((v) => v.name === name && (!v.admin || ctx?.isAdmin)) ?? VIEWS[0]
  ctx.inboxChanged = () => {}
  renderNav()
  fill(live)
  void spec.view(ctx, main, arg)
  main.focus({ preventScroll: true })
}

window.addEventListener('hashchange', route)

void (async () => {
  if (!globalThis.isSecureContext || !crypto.subtle) {
    // browsers offer WebCrypto to secure pages only
    fill(main, h('h2', {}, 'This page needs HTTPS'), h('p', {}, 'The console signs in the browser with WebCrypto, which browsers offer only over https:// or on localhost. Put the relay behind a TLS proxy (see deploy/).'))
    return
  }
  let saved: Identity | null = null
  try {
    saved = await loadIdentity()
  } catch (err) {
    notify(`Reading the key kept in this browser failed: ${(err as Error).message}`, 'error')
  }
  if (saved) await start(saved)
  else showKeySetup()
})()
