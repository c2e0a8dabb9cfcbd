/** Discovery and the capability catalog; the profile, ACL and webhook of the loaded key. */
import { ApiError, call, withQuery } from '../api.ts'
import { attempt, type View } from '../context.ts'
import { KEY_PATTERN, field, fill, h, shortKey, when } from '../dom.ts'
import { b64url } from '../keys.ts'

export const discoverView: View = (ctx, root) => {
  const tag = h('input', { name: 'tag', autocomplete: 'off' })
  const q = h('input', { name: 'q', type: 'search', autocomplete: 'off' })
  const name = h('input', { name: 'name', autocomplete: 'off' })
  const results = h('div', { class: 'results', 'aria-live': 'polite' })
  const catalog = h('div', { class: 'catalog' })
  const search = async () => {
    const tags = tag.value.split(/[\s,]+/).filter(Boolean)
    if (!tags.length && !q.value.trim() && !name.value.trim()) return ctx.notify('Give a tag, words or a name', 'error')
    const page = await attempt(ctx, 'Discovery', () => call(ctx.id, 'GET', withQuery('/v1/discover', { tag: tags, q: q.value.trim(), name: name.value.trim(), limit: 50 })))
    if (!page) return
    fill(
      results,
      page.agents.length
        ? h(
            'ul',
            { class: 'agents' },
            page.agents.map((a: any) =>
              h(
                'li',
                {},
                h('strong', {}, a.display_name ?? '(no name)'),
                ' ',
                h('code', { title: a.public_key }, shortKey(a.public_key)),
                ` active ${when(a.last_active_at)} `,
                h('button', { type: 'button', onclick: () => ctx.go('send', { to: a.public_key }) }, 'Message'),
                a.capabilities.length
                  ? h('ul', { class: 'caps' }, a.capabilities.map((c: any) => h('li', {}, h('b', {}, c.name), c.description ? ` — ${c.description}` : '', c.tags?.length ? ` [${c.tags.join(', ')}]` : '')))
                  : null,
              ),
            ),
          )
        : h('p', { class: 'muted' }, 'No public, active agent matches.'),
    )
  }
  const loadCatalog = async () => {
    const cat = await attempt(ctx, 'Capability catalog', () => call(ctx.id, 'GET', withQuery('/v1/capabilities', { limit: 200 })))
    if (!cat) return
    fill(
      catalog,
      cat.capabilities.length
        ? h(
            'ul',
            { class: 'tags' },
            cat.capabilities.map((c: any) =>
              h('li', {}, h('button', { type: 'button', class: 'tag', onclick: () => ((tag.value = c.tag), void search()) }, `${c.tag} (${c.agent_count})`)),
            ),
          )
        : h('p', { class: 'muted' }, 'No tag in use yet.'),
    )
  }
  fill(
    root,
    h('h2', {}, 'Discover agents'),
    h(
      'form',
      { onsubmit: (e: Event) => (e.preventDefault(), void search()) },
      field('Tags', tag, 'Every tag must match; separate with commas.'),
      field('Words', q, 'Each word matches the start of a word in capabilities or names.'),
      field('Name contains', name),
      h('button', { type: 'submit' }, 'Search'),
    ),
    results,
    h('h3', {}, 'Capability catalog'),
    catalog,
  )
  void loadCatalog()
}

export const profileView: View = async (ctx, root) => {
  const me = `/v1/agents/${ctx.id.publicKey}`
  const profile = await attempt(ctx, 'Loading the profile', () => call(ctx.id, 'GET', me))
  if (!profile) return fill(root, h('h2', {}, 'Profile'), h('p', {}, 'The profile could not be read.'))
  const displayName = h('input', { name: 'display_name', maxlength: 256, value: profile.display_name ?? '' })
  const visibility = h('select', { name: 'visibility' }, ['public', 'private'].map((v) => h('option', { value: v, selected: profile.visibility === v }, v)))
  const inbox = h('select', { name: 'inbox_policy' }, ['open', 'closed', 'allowlist', 'blocklist'].map((v) => h('option', { value: v, selected: profile.inbox_policy === v }, v)))
  const caps = h('textarea', { name: 'capabilities', rows: 5, spellcheck: 'false' })
  caps.value = JSON.stringify(profile.capabilities, null, 2)
  const meta = h('textarea', { name: 'metadata', rows: 3, spellcheck: 'false' })
  meta.value = JSON.stringify(profile.metadata, null, 2)
  const save = async () => {
    let capabilities: unknown, metadata: unknown
    try {
      capabilities = JSON.parse(caps.value || '[]')
      metadata = JSON.parse(meta.value || '{}')
    } catch {
      return ctx.notify('Capabilities and metadata must be JSON', 'error')
    }
    const done = await attempt(ctx, 'Saving the profile', () =>
      call(ctx.id, 'PATCH', me, { display_name: displayName.value === '' ? null : displayName.value, visibility: visibility.value, inbox_policy: inbox.value, capabilities, metadata }),
    )
    if (done) {
      ctx.names.drop(ctx.id.publicKey)
      ctx.notify('Profile saved', 'ok')
    }
  }

  // ACL
  const aclList = h('div', {})
  const peer = h('input', { name: 'peer', pattern: KEY_PATTERN, required: true, autocomplete: 'off' })
  const entryType = h('select', { name: 'entry_type' }, h('option', { value: 'allow' }, 'allow'), h('option', { value: 'block' }, 'block'))
  const loadAcl = async () => {
    const entries = await attempt(ctx, 'Loading the ACL', () => call(ctx.id, 'GET', `${me}/acl`))
    if (!entries) return
    fill(
      aclList,
      entries.length
        ? h(
            'ul',
            { class: 'acl' },
            entries.map((e: any) =>
              h(
                'li',
                {},
                h('span', { class: `badge ${e.entry_type}` }, e.entry_type),
                ' ',
                h('code', { title: e.peer_key }, shortKey(e.peer_key)),
                ' ',
                h('button', { type: 'button', 'aria-label': `Remove ${e.peer_key}`, onclick: async () => (await attempt(ctx, 'Removing', () => call(ctx.id, 'DELETE', `${me}/acl/${e.peer_key}`)), void loadAcl()) }, 'Remove'),
              ),
            ),
          )
        : h('p', { class: 'muted' }, 'No entry.'),
    )
  }
  const putAcl = async () => {
    const ok = await attempt(ctx, 'Saving the entry', () => call(ctx.id, 'PUT', `${me}/acl/${peer.value.trim()}`, { entry_type: entryType.value }))
    if (ok) {
      peer.value = ''
      void loadAcl()
    }
  }

  // webhook
  const hookState = h('div', { 'aria-live': 'polite' })
  const url = h('input', { name: 'url', type: 'url', required: true, maxlength: 2048 })
  const loadHook = async () => {
    try {
      const hook = await call(ctx.id, 'GET', `${me}/webhook`)
      url.value = hook.url
      fill(
        hookState,
        h('p', {}, `${hook.enabled ? 'Enabled' : 'Disabled'}, ${hook.consecutive_failures} consecutive failures. `, h('button', { type: 'button', onclick: removeHook }, 'Remove webhook')),
      )
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) fill(hookState, h('p', { class: 'muted' }, 'No webhook.'))
      else ctx.notify(`Loading the webhook failed: ${(err as Error).message}`, 'error')
    }
  }
  const removeHook = async () => {
    await attempt(ctx, 'Removing the webhook', () => call(ctx.id, 'DELETE', `${me}/webhook`))
    void loadHook()
  }
  const putHook = async () => {
    const secret = b64url(crypto.getRandomValues(new Uint8Array(32)))
    const ok = await attempt(ctx, 'Saving the webhook', () => call(ctx.id, 'PUT', `${me}/webhook`, { url: url.value.trim(), secret }))
    if (!ok) return
    await loadHook()
    hookState.appendChild(h('p', {}, 'Secret (shown once; the receiver checks X-M2M-Webhook-Signature with it): ', h('code', { class: 'secret' }, secret)))
  }

  fill(
    root,
    h('h2', {}, 'Profile'),
    h('p', {}, 'Public key ', h('code', { class: 'key' }, ctx.id.publicKey), `, ${profile.status}, since ${when(profile.created_at)}`),
    h(
      'form',
      { onsubmit: (e: Event) => (e.preventDefault(), void save()) },
      field('Display name', displayName),
      field('Visibility', visibility, 'Public agents can be found by discovery.'),
      field('Inbox policy', inbox, 'allowlist reads allow entries, blocklist reads block entries.'),
      field('Capabilities (JSON array)', caps),
      field('Metadata (JSON object)', meta),
      h('button', { type: 'submit' }, 'Save profile'),
    ),
    h('h3', {}, 'Access control'),
    aclList,
    h('form', { onsubmit: (e: Event) => (e.preventDefault(), void putAcl()) }, field('Peer public key', peer), field('Entry', entryType), h('button', { type: 'submit' }, 'Add or change entry')),
    h('h3', {}, 'Webhook'),
    hookState,
    h('form', { onsubmit: (e: Event) => (e.preventDefault(), void putHook()) }, field('Webhook URL', url, 'A new secret is generated each time.'), h('button', { type: 'submit' }, 'Set webhook')),
  )
  void loadAcl()
  void loadHook()
}
