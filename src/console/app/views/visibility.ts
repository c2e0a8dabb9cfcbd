/**
 * "What this relay can see": the messages of the signed-in agent as the relay stores them. Who wrote
 * to whom, when and how large is visible to the relay (it must route and expire them); the body and the
 * files of an end-to-end encrypted message are not. Reads change nothing: delivered messages are listed
 * by status, live ones come from the page's own copy, sent ones are read by id as their sender.
 */
import { call, withQuery } from '../api.ts'
import { attempt, type View } from '../context.ts'
import { fill, h, lockIcon, when } from '../dom.ts'
import { isEncryptedMessage } from '../e2e.ts'
import { agentLabel } from '../names.ts'

/** The message as the relay holds it: the envelope, not what this browser decrypted. */
function asStored(m: any): any {
  const { lock: _lock, envelope, ...rest } = m
  return envelope ? { ...rest, ...envelope } : rest
}

const bytes = (n: number) => (n < 1024 ? `${n} B` : n < 1024 * 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1024 / 1024).toFixed(1)} MiB`)
const bodyBytes = (body: unknown) => (body === undefined || body === null ? 0 : new TextEncoder().encode(JSON.stringify(body)).length)

export const visibilityView: View = async (ctx, root) => {
  const table = h('div', { class: 'table-wrap' })
  fill(
    root,
    h('h2', {}, 'What this relay can see'),
    h(
      'p',
      {},
      'Everything below is what the relay stores for your messages, and so what its operator, a copy of its database or a backup shows. ',
      'It must see who sends to whom, when, the thread, the content type on the envelope and every size: it routes, counts and expires messages by them. ',
      'Of an end-to-end encrypted message it holds only ciphertext: the body and the attachments are sealed to the recipient’s key, which never leaves the recipient (this browser, for messages to you).',
    ),
    h(
      'ul',
      { class: 'visibility-legend' },
      h('li', {}, h('strong', {}, 'Visible: '), 'sender, recipient, created and expiry times, delivery status, thread and reply ids, sizes of the body and of each attachment, the file names of plaintext attachments (the relay’s clients send none with an encrypted one).'),
      h('li', {}, h('strong', {}, 'Not visible when encrypted: '), 'the body and its real content type, the attachments’ bytes. Padding (v3) blurs the body’s length.'),
    ),
    table,
  )
  const rows = new Map<string, any>()
  for (const m of ctx.inbox.values()) rows.set(m.message_id, asStored(m))
  await attempt(ctx, 'Reading your messages', async () => {
    const page = await call(ctx.id, 'GET', withQuery('/v1/messages', { status: 'delivered', limit: 50 }))
    for (const m of page.messages) rows.set(m.message_id, m)
    for (const id of ctx.sent) {
      // read as the sender: changes nothing (an expired one is simply gone)
      const m = await call(ctx.id, 'GET', `/v1/messages/${encodeURIComponent(id)}`).catch(() => null)
      if (m) rows.set(m.message_id, m)
    }
  })
  const list = [...rows.values()].sort((a, b) => String(b.created_at).localeCompare(String(a.created_at)))
  if (!list.length) return fill(table, h('p', { class: 'muted' }, 'No message to show yet: messages you receive, and those you send from this page, appear here.'))
  fill(
    table,
    h(
      'table',
      { class: 'visibility' },
      h('caption', {}, `${list.length} message${list.length === 1 ? '' : 's'} as stored`),
      h('thead', {}, h('tr', {}, ['From', 'To', 'Created', 'Status', 'Body', 'Attachments', 'What is stored'].map((t) => h('th', { scope: 'col' }, t)))),
      h(
        'tbody',
        {},
        list.map((m) => {
          const sealed = isEncryptedMessage(m)
          const files = (m.attachments ?? []) as any[]
          return h(
            'tr',
            { 'data-message-id': m.message_id, class: sealed ? 'sealed' : 'plain' },
            h('td', {}, agentLabel(ctx, m.sender_key)),
            h('td', {}, agentLabel(ctx, m.recipient_key)),
            h('td', {}, h('time', { datetime: m.created_at }, when(m.created_at))),
            h('td', {}, m.status),
            h(
              'td',
              { class: 'body-cell' },
              sealed ? [lockIcon(), ' ', `ciphertext, ${bytes(bodyBytes(m.body))} (v${m.body?.v ?? '?'})`] : [h('strong', { class: 'readable' }, 'readable'), `, ${m.content_type}, ${bytes(bodyBytes(m.body))}`],
            ),
            h(
              'td',
              {},
              files.length
                ? files.map((a) => h('div', {}, a.encrypted ? [lockIcon(), ' '] : '', `${a.filename ?? a.blob_id}: ${bytes(a.size ?? 0)}${a.encrypted ? ', ciphertext' : ', readable'}`))
                : '—',
            ),
            h('td', {}, h('details', {}, h('summary', {}, sealed ? 'the envelope' : 'the message'), h('pre', { class: 'stored' }, JSON.stringify({ content_type: m.content_type, body: m.body, attachments: m.attachments }, null, 2)))),
          )
        }),
      ),
    ),
  )
}
