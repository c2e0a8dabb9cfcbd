/** Inbox (live over the WebSocket, with ack), threads, sending with attachments, message status. */
import { call, download, upload, withQuery } from '../api.ts'
import { attempt, type Ctx, type View } from '../context.ts'
import { KEY_PATTERN, field, fill, h, when } from '../dom.ts'
import { agentLabel } from '../names.ts'

/**
 * A body as people read it: text as text — a JSON string, or an object whose `text` is a string (what
 * `relay send --text` sends) — and any other JSON folded away, one click to open.
 */
export function messageBody(body: unknown): HTMLElement {
  if (body === undefined || body === null) return h('p', { class: 'body muted' }, '(no body)')
  if (typeof body === 'string') return h('div', { class: 'body text' }, body)
  if (typeof body !== 'object') return h('div', { class: 'body text' }, h('code', {}, JSON.stringify(body)))
  const text = typeof body === 'object' && !Array.isArray(body) && typeof (body as { text?: unknown }).text === 'string' ? (body as { text: string }).text : null
  const fields = typeof body === 'object' && !Array.isArray(body) ? Object.keys(body as object) : []
  if (text !== null && fields.length === 1) return h('div', { class: 'body text' }, text)
  const json = JSON.stringify(body, null, 2)
  const summary = Array.isArray(body) ? `JSON array, ${body.length} items` : typeof body === 'object' ? `JSON, ${fields.length} field${fields.length === 1 ? '' : 's'}: ${fields.slice(0, 4).join(', ')}${fields.length > 4 ? ', …' : ''}` : 'JSON'
  return h('div', { class: 'body' }, text !== null ? h('div', { class: 'text' }, text) : null, h('details', { class: 'json' }, h('summary', {}, summary), h('pre', {}, json)))
}

/** One message as a card: sender, time, body, attachments with download buttons, and actions. */
export function messageCard(ctx: Ctx, m: any, actions: HTMLElement[] = []): HTMLElement {
  const mine = m.sender_key === ctx.id.publicKey
  return h(
    'article',
    { class: `message ${m.status}`, 'data-message-id': m.message_id, 'aria-label': `Message ${m.message_id}` },
    h(
      'header',
      {},
      h('span', { class: 'who' }, mine ? agentLabel(ctx, m.recipient_key, 'to ') : agentLabel(ctx, m.sender_key, 'from ')),
      h('time', { datetime: m.created_at }, when(m.created_at)),
      h('span', { class: `badge ${m.status}` }, m.status),
    ),
    messageBody(m.body),
    m.attachments?.length
      ? h(
          'ul',
          { class: 'attachments', 'aria-label': 'Attachments' },
          m.attachments.map((a: any) =>
            h(
              'li',
              {},
              h(
                'button',
                { type: 'button', onclick: () => attempt(ctx, 'Download', () => download(ctx.id, a.blob_id, a.filename ?? a.blob_id)) },
                `Download ${a.filename ?? a.blob_id}`,
              ),
              ` ${a.content_type}, ${a.size} bytes`,
            ),
          ),
        )
      : null,
    h(
      'footer',
      {},
      m.thread_id ? h('button', { type: 'button', class: 'link', onclick: () => ctx.go('threads', { thread: m.thread_id }) }, `thread ${m.thread_id}`) : null,
      h('code', { class: 'id' }, m.message_id),
      actions,
    ),
  )
}

export const inboxView: View = (ctx, root) => {
  const list = h('div', { class: 'messages', 'aria-live': 'polite', 'aria-relevant': 'additions' })
  const render = () => {
    const items = [...ctx.inbox.values()].reverse()
    fill(
      list,
      items.length
        ? items.map((m) =>
            messageCard(ctx, m, [
              m.status === 'sent'
                ? h('button', { type: 'button', onclick: () => ack(m) }, 'Ack')
                : h('span', { class: 'muted' }, 'acknowledged'),
              h('button', { type: 'button', onclick: () => ctx.go('send', { to: m.sender_key, reply: m.message_id, thread: m.thread_id ?? '' }) }, 'Reply'),
            ]),
          )
        : h('p', { class: 'muted' }, 'No message yet. Messages addressed to this key appear here as they arrive.'),
    )
  }
  const ack = (m: any) => {
    ctx.socket?.ack(m.message_id)
    m.status = 'delivered'
    render()
    ctx.notify(`Acknowledged ${m.message_id}`)
  }
  const delivered = h('div', { class: 'messages' })
  const loadDelivered = () =>
    attempt(ctx, 'Loading delivered messages', async () => {
      const page = await call(ctx.id, 'GET', withQuery('/v1/messages', { status: 'delivered', limit: 50 }))
      fill(delivered, page.messages.length ? page.messages.reverse().map((m: any) => messageCard(ctx, m)) : h('p', { class: 'muted' }, 'None.'))
    })
  ctx.inboxChanged = render
  render()
  fill(
    root,
    h('h2', {}, 'Inbox'),
    h('p', { class: 'muted' }, 'Live: messages are pushed over the WebSocket. Ack marks one delivered.'),
    list,
    h('h3', {}, 'Delivered earlier'),
    h('button', { type: 'button', onclick: loadDelivered }, 'Show delivered messages'),
    delivered,
  )
}

export const threadsView: View = (ctx, root, arg) => {
  const input = h('input', { name: 'thread', required: true, maxlength: 128, value: arg.thread ?? '', autocomplete: 'off' })
  const out = h('div', { class: 'messages' })
  const load = async () => {
    if (!input.value) return
    await attempt(ctx, 'Loading the thread', async () => {
      const page = await call(ctx.id, 'GET', withQuery(`/v1/messages/threads/${encodeURIComponent(input.value)}`, { limit: 100 }))
      fill(out, page.messages.length ? page.messages.map((m: any) => messageCard(ctx, m)) : h('p', { class: 'muted' }, 'No message of yours in this thread.'))
    })
  }
  const form = h('form', { onsubmit: (e: Event) => (e.preventDefault(), void load()) }, field('Thread id', input), h('button', { type: 'submit' }, 'Show thread'))
  fill(root, h('h2', {}, 'Threads'), form, out)
  if (arg.thread) void load()
}

export const sendView: View = (ctx, root, arg) => {
  const to = h('input', { name: 'recipient', required: true, pattern: KEY_PATTERN, value: arg.to ?? '', autocomplete: 'off', spellcheck: 'false' })
  const kind = h('select', { name: 'kind' }, h('option', { value: 'text' }, 'Text'), h('option', { value: 'json' }, 'JSON'))
  const body = h('textarea', { name: 'body', rows: 6 })
  const thread = h('input', { name: 'thread', maxlength: 128, value: arg.thread ?? '' })
  const reply = h('input', { name: 'in_reply_to', value: arg.reply ?? '' })
  const files = h('input', { type: 'file', name: 'files', multiple: true })
  const progress = h('div', { class: 'uploads', 'aria-live': 'polite' })
  const result = h('div', { class: 'result', 'aria-live': 'polite' })
  const submit = h('button', { type: 'submit' }, 'Send')

  const send = async () => {
    let parsedBody: unknown = undefined
    if (body.value !== '') {
      if (kind.value === 'json') {
        try {
          parsedBody = JSON.parse(body.value)
        } catch {
          ctx.notify('The body is not valid JSON', 'error')
          body.focus()
          return
        }
      } else parsedBody = body.value
    }
    submit.disabled = true
    try {
      const attachments: { blob_id: string; filename: string }[] = []
      fill(progress)
      for (const file of Array.from(files.files ?? [])) {
        const bar = h('progress', { max: file.size || 1, value: 0, 'aria-label': `Uploading ${file.name}` })
        const pct = h('span', {}, '0 %')
        progress.appendChild(h('div', { class: 'upload' }, h('span', {}, file.name), bar, pct))
        const blob = await attempt(ctx, `Uploading ${file.name}`, () =>
          upload(ctx.id, file, (sent, total) => {
            bar.max = total || 1
            bar.value = sent
            pct.textContent = `${Math.round((sent / (total || 1)) * 100)} %`
          }),
        )
        if (!blob) return
        pct.textContent = `done: ${blob.blob_id}`
        attachments.push({ blob_id: blob.blob_id, filename: file.name })
      }
      const message: Record<string, unknown> = { recipient_key: to.value.trim(), content_type: kind.value === 'json' ? 'application/json' : 'text/plain' }
      if (parsedBody !== undefined) message.body = parsedBody
      if (attachments.length) message.attachments = attachments
      if (thread.value) message.thread_id = thread.value
      if (reply.value) message.in_reply_to = reply.value
      const sent = await attempt(ctx, 'Sending', () => call(ctx.id, 'POST', '/v1/messages', message))
      if (!sent) return
      ctx.notify(`Sent ${sent.message_id}`, 'ok')
      fill(
        result,
        h('p', {}, 'Sent ', h('code', { class: 'sent-id' }, sent.message_id), ' ', h('button', { type: 'button', onclick: () => ctx.go('status', { id: sent.message_id }) }, 'Status')),
      )
      body.value = ''
      files.value = ''
    } finally {
      submit.disabled = false
    }
  }

  fill(
    root,
    h('h2', {}, 'Send a message'),
    h(
      'form',
      { onsubmit: (e: Event) => (e.preventDefault(), void send()) },
      field('Recipient public key', to),
      field('Body format', kind),
      field('Body', body, 'Text is sent as a JSON string with content type text/plain; JSON as the value itself.'),
      field('Attachments', files, 'Each file is uploaded as a blob first, then attached.'),
      progress,
      h('details', {}, h('summary', {}, 'Thread and reply'), field('Thread id', thread), field('In reply to (message id)', reply)),
      submit,
    ),
    result,
  )
  ;(arg.to ? body : to).focus()
}

export const statusView: View = (ctx, root, arg) => {
  const input = h('input', { name: 'message', required: true, value: arg.id ?? '', autocomplete: 'off' })
  const out = h('div', { class: 'result', 'aria-live': 'polite' })
  const load = async () => {
    const st = await attempt(ctx, 'Reading the status', () => call(ctx.id, 'GET', `/v1/messages/${encodeURIComponent(input.value.trim())}/status`))
    if (!st) return fill(out)
    fill(
      out,
      h(
        'dl',
        { class: 'facts' },
        h('dt', {}, 'Status'),
        h('dd', { class: 'status-value' }, st.status),
        h('dt', {}, 'Created'),
        h('dd', {}, when(st.created_at)),
        h('dt', {}, 'Expires'),
        h('dd', {}, when(st.expires_at)),
        st.delivered_at ? [h('dt', {}, 'Delivered'), h('dd', {}, when(st.delivered_at))] : null,
      ),
    )
  }
  fill(root, h('h2', {}, 'Message status'), h('form', { onsubmit: (e: Event) => (e.preventDefault(), void load()) }, field('Message id', input), h('button', { type: 'submit' }, 'Check')), out)
  if (arg.id) void load()
}

export const downloadsView: View = (ctx, root) => {
  const input = h('input', { name: 'blob', required: true, pattern: 'blob_[0-9a-f]{24}', autocomplete: 'off' })
  const name = h('input', { name: 'filename' })
  fill(
    root,
    h('h2', {}, 'Downloads'),
    h('p', { class: 'muted' }, 'Attachments of your messages have download buttons in the inbox and threads. Any blob you may read can be fetched by id here.'),
    h(
      'form',
      { onsubmit: (e: Event) => (e.preventDefault(), void attempt(ctx, 'Download', () => download(ctx.id, input.value.trim(), name.value || input.value.trim()))) },
      field('Blob id', input),
      field('Save as', name),
      h('button', { type: 'submit' }, 'Download'),
    ),
  )
}
