/** Operator views, shown when the loaded key is one of RELAY_ADMIN_KEYS: the /v1/admin API. */
import { call, withQuery } from '../api.ts'
import { attempt, type Ctx, type View } from '../context.ts'
import { KEY_PATTERN, field, fill, h, shortKey, svg, when } from '../dom.ts'

const bytes = (n: number) => (n < 1024 ? `${n} B` : n < 1024 ** 2 ? `${(n / 1024).toFixed(1)} KiB` : n < 1024 ** 3 ? `${(n / 1024 ** 2).toFixed(1)} MiB` : `${(n / 1024 ** 3).toFixed(1)} GiB`)

function table(headers: string[], rows: (Node | string | number)[][], caption: string): HTMLElement {
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      {},
      h('caption', { class: 'sr-only' }, caption),
      h('thead', {}, h('tr', {}, headers.map((x) => h('th', { scope: 'col' }, x)))),
      h('tbody', {}, rows.map((r) => h('tr', {}, r.map((c) => h('td', {}, c))))),
    ),
  )
}

async function statsSection(ctx: Ctx, el: HTMLElement): Promise<void> {
  const s = await attempt(ctx, 'Stats', () => call(ctx.id, 'GET', '/v1/admin/stats'))
  if (!s) return
  fill(
    el,
    h('h3', {}, 'Stats'),
    h(
      'dl',
      { class: 'facts stats' },
      h('dt', {}, 'Agents'),
      h('dd', {}, `${s.agents.active} active, ${s.agents.suspended} suspended (${s.agents.total})`),
      h('dt', {}, 'Messages'),
      h('dd', {}, `${s.messages.sent} sent, ${s.messages.delivered} delivered, ${s.messages.expired} expired`),
      h('dt', {}, 'Blobs'),
      h('dd', {}, `${s.blobs.records} records, ${bytes(s.blobs.bytes)}; ${s.blobs.stored_files} stored, ${bytes(s.blobs.stored_bytes)}`),
      h('dt', {}, 'Webhooks'),
      h('dd', {}, `${s.webhooks.enabled} enabled, ${s.webhooks.disabled} disabled, ${s.webhooks.pending_deliveries} pending`),
      h('dt', {}, 'Database'),
      h('dd', {}, `${bytes(s.database.size_bytes)} + ${bytes(s.database.wal_bytes)} WAL`),
    ),
  )
}

interface TrafficMinute {
  minute: string
  requests: number
  client_errors: number
  server_errors: number
}

const clock = (iso: string) => new Date(iso).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' })

/** A round step for the vertical scale (1, 2, 5 × 10^n) so that the top line is a readable number. */
function niceMax(n: number): number {
  if (n <= 4) return 4
  const p = 10 ** Math.floor(Math.log10(n))
  for (const m of [1, 2, 5, 10]) if (m * p >= n) return m * p
  return 10 * p
}

/**
 * Requests per minute over the last hour as bars, the errors among them stacked in colour (4xx amber,
 * 5xx red): inline SVG, drawn from GET /v1/admin/traffic. The same figures are in a table for screen
 * readers and for exact values.
 */
export function trafficChart(minutes: TrafficMinute[]): HTMLElement {
  const W = 720
  const H = 200
  const left = 44
  const bottom = 24
  const top = 8
  const plotW = W - left - 8
  const plotH = H - top - bottom
  const max = niceMax(Math.max(0, ...minutes.map((m) => m.requests)))
  const y = (v: number) => top + plotH - (v / max) * plotH
  const slot = plotW / Math.max(1, minutes.length)
  const barW = Math.max(1, slot - 2)
  const grid: SVGElement[] = []
  for (const v of [0, max / 2, max]) {
    grid.push(svg('line', { class: 'grid', x1: left, x2: W - 8, y1: y(v), y2: y(v) }))
    grid.push(svg('text', { class: 'tick', x: left - 6, y: y(v) + 4, 'text-anchor': 'end' }, String(v)))
  }
  const bars: SVGElement[] = []
  minutes.forEach((m, i) => {
    const x = left + i * slot + 1
    const ok = m.requests - m.client_errors - m.server_errors
    const label = `${clock(m.minute)}: ${m.requests} requests, ${m.client_errors} 4xx, ${m.server_errors} 5xx`
    let base = top + plotH
    const g = svg('g', { class: 'minute' }, svg('title', {}, label))
    for (const [n, cls] of [
      [ok, 'ok'],
      [m.client_errors, 'client'],
      [m.server_errors, 'server'],
    ] as const) {
      if (n <= 0) continue
      const hgt = (n / max) * plotH
      base -= hgt
      g.append(svg('rect', { class: `bar ${cls}`, x, y: base, width: barW, height: Math.max(hgt, 1) }))
    }
    bars.push(g)
  })
  const ticks: SVGElement[] = []
  for (let i = 0; i < minutes.length; i += 15) ticks.push(svg('text', { class: 'tick', x: left + i * slot, y: H - 6 }, clock(minutes[i].minute)))
  if (minutes.length) ticks.push(svg('text', { class: 'tick', x: W - 8, y: H - 6, 'text-anchor': 'end' }, 'now'))
  const total = minutes.reduce((a, m) => a + m.requests, 0)
  const errors4 = minutes.reduce((a, m) => a + m.client_errors, 0)
  const errors5 = minutes.reduce((a, m) => a + m.server_errors, 0)
  const chart = svg(
    'svg',
    { class: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-labelledby': 'traffic-summary' },
    svg('line', { class: 'axis', x1: left, x2: W - 8, y1: top + plotH, y2: top + plotH }),
    ...grid,
    ...bars,
    ...ticks,
  )
  const busiest = minutes.filter((m) => m.requests > 0)
  return h(
    'div',
    { class: 'traffic' },
    h('p', { id: 'traffic-summary' }, `Last hour: ${total} requests, ${errors4} client errors (4xx), ${errors5} server errors (5xx).`),
    h('ul', { class: 'legend', 'aria-hidden': 'true' }, h('li', { class: 'ok' }, 'answered'), h('li', { class: 'client' }, '4xx'), h('li', { class: 'server' }, '5xx')),
    chart,
    h(
      'details',
      {},
      h('summary', {}, 'Figures per minute'),
      busiest.length
        ? table(['Minute', 'Requests', '4xx', '5xx'], busiest.map((m) => [clock(m.minute), m.requests, m.client_errors, m.server_errors]), 'Requests per minute')
        : h('p', { class: 'muted' }, 'No request in the last hour.'),
    ),
  )
}

async function trafficSection(ctx: Ctx, el: HTMLElement): Promise<void> {
  const r = await attempt(ctx, 'Traffic', () => call(ctx.id, 'GET', '/v1/admin/traffic'))
  if (!r) return
  fill(el, h('h3', {}, 'Traffic and errors, last hour'), trafficChart(r.minutes))
}

async function agentsSection(ctx: Ctx, el: HTMLElement, changed: () => void): Promise<void> {
  const status = h('select', { name: 'status' }, h('option', { value: '' }, 'any'), h('option', { value: 'active' }, 'active'), h('option', { value: 'suspended' }, 'suspended'))
  const reason = h('input', { name: 'reason', maxlength: 500 })
  const list = h('div', {})
  let cursor: string | null = null
  const load = async (more = false) => {
    const page = await attempt(ctx, 'Agents', () => call(ctx.id, 'GET', withQuery('/v1/admin/agents', { status: status.value, limit: 50, cursor: more ? cursor : null })))
    if (!page) return
    cursor = page.next_cursor
    const rows = page.agents.map((a: any) => [
      h('code', { title: a.public_key, class: 'agent-key' }, shortKey(a.public_key)),
      a.display_name ?? '',
      h('span', { class: `badge ${a.status}` }, a.status, a.suspended_reason ? `: ${a.suspended_reason}` : ''),
      when(a.last_active_at),
      a.status === 'active'
        ? h('button', { type: 'button', 'aria-label': `Suspend ${a.public_key}`, 'data-key': a.public_key, onclick: () => act('suspend', a.public_key, a.display_name) }, 'Suspend')
        : h('button', { type: 'button', 'aria-label': `Unsuspend ${a.public_key}`, 'data-key': a.public_key, onclick: () => act('unsuspend', a.public_key) }, 'Unsuspend'),
    ])
    const t = table(['Key', 'Name', 'Status', 'Last active', ''], rows, 'Agents')
    if (more) list.appendChild(t)
    else fill(list, t)
    if (cursor) list.appendChild(h('button', { type: 'button', onclick: () => load(true) }, 'More agents'))
  }
  const act = async (action: 'suspend' | 'unsuspend', key: string, name?: string | null) => {
    const who = name ? `${name} (${shortKey(key)})` : shortKey(key)
    if (action === 'suspend' && !confirm(`Suspend ${who}? It can no longer send, poll or connect until it is unsuspended; its open connections are closed.`)) return
    const body = action === 'suspend' && reason.value ? { reason: reason.value } : undefined
    const done = await attempt(ctx, action === 'suspend' ? 'Suspending' : 'Unsuspending', () => call(ctx.id, 'POST', `/v1/admin/agents/${key}/${action}`, body))
    if (done) ctx.notify(`${done.status === 'suspended' ? 'Suspended' : 'Unsuspended'} ${shortKey(key)}`, 'ok')
    void load()
    changed()
  }
  fill(
    el,
    h('h3', {}, 'Agents'),
    h('form', { class: 'inline', onsubmit: (e: Event) => (e.preventDefault(), void load()) }, field('Status', status), field('Reason for suspensions', reason), h('button', { type: 'submit' }, 'List')),
    list,
  )
  await load()
}

async function allowlistSection(ctx: Ctx, el: HTMLElement): Promise<void> {
  const key = h('input', { name: 'allow_key', pattern: KEY_PATTERN, required: true, autocomplete: 'off' })
  const note = h('input', { name: 'note', maxlength: 500 })
  const list = h('div', {})
  const load = async () => {
    const r = await attempt(ctx, 'Allowlist', () => call(ctx.id, 'GET', '/v1/admin/admission'))
    if (!r) return
    fill(
      list,
      r.allowed.length
        ? table(
            ['Key', 'Since', 'Note', ''],
            r.allowed.map((e: any) => [
              h('code', { title: e.public_key }, shortKey(e.public_key)),
              when(e.created_at),
              e.note ?? '',
              h('button', { type: 'button', 'aria-label': `Revoke ${e.public_key}`, onclick: async () => (await attempt(ctx, 'Revoking', () => call(ctx.id, 'DELETE', `/v1/admin/admission/${e.public_key}`)), void load()) }, 'Revoke'),
            ]),
            'Allowlist',
          )
        : h('p', { class: 'muted' }, 'No key listed (the allowlist matters only under RELAY_ADMISSION=allowlist).'),
    )
  }
  const add = async () => {
    const ok = await attempt(ctx, 'Allowing', () => call(ctx.id, 'POST', '/v1/admin/admission', { public_key: key.value.trim(), ...(note.value ? { note: note.value } : {}) }))
    if (ok) {
      key.value = ''
      note.value = ''
      void load()
    }
  }
  fill(el, h('h3', {}, 'Admission allowlist'), list, h('form', { class: 'inline', onsubmit: (e: Event) => (e.preventDefault(), void add()) }, field('Public key', key), field('Note', note), h('button', { type: 'submit' }, 'Allow')))
  await load()
}

async function queueSection(ctx: Ctx, el: HTMLElement): Promise<void> {
  const q = await attempt(ctx, 'Webhook queue', () => call(ctx.id, 'GET', withQuery('/v1/admin/webhooks', { limit: 100 })))
  if (!q) return
  fill(
    el,
    h('h3', {}, `Webhook queue (${q.pending_deliveries})`),
    q.deliveries.length
      ? table(
          ['Agent', 'Message', 'State', 'Attempts', 'Next attempt', 'Last error'],
          q.deliveries.map((d: any) => [h('code', { title: d.public_key }, shortKey(d.public_key)), d.message_id, d.state, d.attempts, when(d.next_attempt_at), d.last_error ?? '']),
          'Webhook queue',
        )
      : h('p', { class: 'muted' }, 'No delivery is waiting.'),
  )
}

async function errorsSection(ctx: Ctx, el: HTMLElement): Promise<void> {
  const r = await attempt(ctx, 'Recent errors', () => call(ctx.id, 'GET', withQuery('/v1/admin/errors', { limit: 50 })))
  if (!r) return
  fill(
    el,
    h('h3', {}, 'Recent warnings and errors'),
    r.errors.length
      ? h('ul', { class: 'log' }, r.errors.map((e: any) => h('li', {}, h('span', { class: `badge ${e.level}` }, e.level), ` ${when(e.time)} ${e.msg} `, h('code', {}, JSON.stringify(e.fields)))))
      : h('p', { class: 'muted' }, 'Nothing since the relay started.'),
  )
}

export const adminView: View = async (ctx, root) => {
  const parts = Array.from({ length: 6 }, () => h('section', { class: 'panel' }))
  fill(root, h('h2', {}, 'Operator'), h('button', { type: 'button', onclick: () => ctx.go('admin') }, 'Refresh'), parts)
  await Promise.all([
    trafficSection(ctx, parts[0]),
    statsSection(ctx, parts[1]),
    agentsSection(ctx, parts[2], () => void statsSection(ctx, parts[1])),
    allowlistSection(ctx, parts[3]),
    queueSection(ctx, parts[4]),
    errorsSection(ctx, parts[5]),
  ])
}
