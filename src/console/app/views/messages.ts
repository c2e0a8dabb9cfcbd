/** Inbox (live over the WebSocket, with ack), threads, sending with attachments, message status. */
import { ApiError, call, download, fetchBlob, saveFile, upload, withQuery } from '../api.ts'
import { sha256OfBlob } from '../blob-io.ts'
import { attempt, type Ctx, type View } from '../context.ts'
import { KEY_PATTERN, field, fill, h, lockIcon, when } from '../dom.ts'
import { decryptAttachment, encryptFile, forgetDeclaration, NO_AGREEMENT_KEY, openForDisplay, sealForSend, versionFor, type Lock } from '../e2e.ts'
import { agentLabel } from '../names.ts'

/** Why a message does not open, in words; the format's reason code beside it. */
const FAILURE_TEXT: Record<string, string> = {
  no_key: 'this browser holds no decryption key for this agent',
  bad_key: 'not encrypted for this key (or a key in it is unusable)',
  authentication_failed: 'wrong key, or changed on the way (tampered)',
  bad_signature: "the sender's signature inside does not verify (tampered or forged)",
  unsupported_version: 'an encryption version this console does not read',
  malformed: 'not a well-formed encrypted message',
  truncated: 'cut short',
}

/** The lock of an encrypted message: how it was encrypted, or why it does not open. */
function lockLine(m: any): HTMLElement | null {
  const lock = m.lock as Lock | undefined
  if (!lock) return null
  if (lock.error) {
    return h(
      'div',
      { class: 'lock failed', role: 'note' },
      lockIcon(),
      h('strong', {}, 'Encrypted; cannot be decrypted: '),
      `${FAILURE_TEXT[lock.error.reason] ?? lock.error.reason} `,
      h('code', { class: 'reason' }, lock.error.reason),
      h('small', { class: 'detail' }, lock.error.message),
    )
  }
  const how = lock.outgoing
    ? `end-to-end encrypted (v${lock.version}) for the recipient: only its key opens it`
    : `end-to-end encrypted (v${lock.version}), ${lock.sender_verified ? 'sender verified' : lock.signer_key ? `signed by another key ${lock.signer_key}` : 'sender not verified'}`
  return h('div', { class: 'lock ok', title: how }, lockIcon(), h('span', { class: 'lock-text' }, how))
}

/** Opens every encrypted message of a page (one at a time: each may ask WebCrypto for a DH). */
export async function openAll(ctx: Ctx, messages: any[]): Promise<any[]> {
  const out: any[] = []
  for (const m of messages) out.push(await openForDisplay(ctx.id, m))
  return out
}

async function downloadAttachment(ctx: Ctx, m: any, a: any): Promise<void> {
  const name = a.filename ?? a.blob_id
  if (!a.encrypted) return download(ctx.id, a.blob_id, name)
  if (m.lock?.outgoing) throw new Error('this attachment is encrypted for the recipient; only its key opens it')
  saveFile(await decryptAttachment(ctx.id, m, a, await fetchBlob(ctx.id, a.blob_id)), name)
  ctx.notify(`Decrypted ${name}`)
}

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
  const sealed = m.lock?.error || m.lock?.outgoing
  return h(
    'article',
    { class: `message ${m.status}${m.lock ? ' encrypted' : ''}`, 'data-message-id': m.message_id, 'aria-label': `Message ${m.message_id}` },
    h(
      'header',
      {},
      h('span', { class: 'who' }, mine ? agentLabel(ctx, m.recipient_key, 'to ') : agentLabel(ctx, m.sender_key, 'from ')),
      h('time', { datetime: m.created_at }, when(m.created_at)),
      h('span', { class: `badge ${m.status}` }, m.status),
    ),
    lockLine(m),
    // an envelope that does not open is never shown as if it were the text
    sealed ? null : messageBody(m.body),
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
                { type: 'button', onclick: () => attempt(ctx, 'Download', () => downloadAttachment(ctx, m, a)) },
                `Download ${a.filename ?? a.blob_id}`,
              ),
              a.encrypted ? [' ', lockIcon('encrypted: decrypted in this browser as it downloads')] : null,
              ` ${a.content_type}, ${a.size} bytes${a.encrypted ? ' (encrypted)' : ''}`,
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
      const opened = await openAll(ctx, page.messages.reverse())
      fill(delivered, opened.length ? opened.map((m: any) => messageCard(ctx, m)) : h('p', { class: 'muted' }, 'None.'))
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
      const opened = await openAll(ctx, page.messages)
      fill(out, opened.length ? opened.map((m: any) => messageCard(ctx, m)) : h('p', { class: 'muted' }, 'No message of yours in this thread.'))
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

  const plain = h('input', { type: 'checkbox', name: 'plain', id: 'send-plain' })
  const encrypt = h('input', { type: 'checkbox', name: 'encrypt', id: 'send-encrypt' })
  const encryption = h('p', { class: 'encryption-note muted', id: 'encryption-note', 'aria-live': 'polite' })
  /** What a send to the recipient typed will be: encrypted by its declaration, or plaintext. */
  const describe = async () => {
    const key = to.value.trim()
    if (!to.checkValidity() || !key) return fill(encryption)
    if (plain.checked) return fill(encryption, 'Plaintext: the relay can read the body and the files.')
    let version: number | null = null
    try {
      version = await versionFor(ctx.id, key, encrypt.checked)
    } catch {
      return fill(encryption)
    }
    if (version && !ctx.id.agreementKey) return fill(encryption, h('span', { class: 'error' }, NO_AGREEMENT_KEY))
    fill(
      encryption,
      version
        ? [lockIcon(), ' ', `End-to-end encrypted (v${version}): ${encrypt.checked ? 'asked for' : 'the recipient declares it reads encrypted messages'}. The relay sees who, when and how large, not the body or the files.`]
        : 'Plaintext: the recipient declares no encryption support (its inbox may still require it; the send then switches to encrypted).',
    )
  }
  to.addEventListener('change', () => void describe())
  // plaintext and encryption asked for exclude each other
  plain.addEventListener('change', () => {
    if (plain.checked) encrypt.checked = false
    void describe()
  })
  encrypt.addEventListener('change', () => {
    if (encrypt.checked) plain.checked = false
    void describe()
  })

  const send = async (force = false): Promise<void> => {
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
    const recipient = to.value.trim()
    submit.disabled = true
    try {
      const version = plain.checked ? null : await attempt(ctx, "Reading the recipient's profile", () => versionFor(ctx.id, recipient, force || encrypt.checked))
      if (version === undefined) return
      if (version && !ctx.id.agreementKey) return ctx.notify(NO_AGREEMENT_KEY, 'error')
      const attachments: Record<string, unknown>[] = []
      /** Blobs this attempt stored (201): removed again if the send is refused and made once more encrypted. */
      const createdHere: string[] = []
      fill(progress)
      for (const file of Array.from(files.files ?? [])) {
        const bar = h('progress', { max: file.size || 1, value: 0, 'aria-label': `Uploading ${file.name}` })
        const pct = h('span', { class: 'upload-state' }, version ? 'encrypting…' : 'reading…')
        progress.appendChild(h('div', { class: 'upload' }, h('span', {}, file.name), bar, pct))
        // the signature covers the SHA-256 of what is uploaded: the file is read (and encrypted) once before it leaves
        const step = (doing: string) => (done: number) => {
          bar.value = done
          pct.textContent = `${doing} ${Math.floor((done / (file.size || 1)) * 100)} %`
        }
        const prepared = await attempt(ctx, `${version ? 'Encrypting' : 'Reading'} ${file.name}`, async () => {
          if (!version) return { body: file as Blob, sha256: await sha256OfBlob(file, step('reading')), sealed: null }
          const sealed = await encryptFile(ctx.id, file, recipient, version, step('encrypting'))
          return { body: sealed.ciphertext, sha256: sealed.sha256, sealed }
        })
        if (!prepared) return
        const { sealed } = prepared
        const blob = await attempt(ctx, `Uploading ${file.name}`, () =>
          upload(ctx.id, prepared.body, prepared.sha256, (sent, total) => {
            bar.max = total || 1
            bar.value = sent
            pct.textContent = `uploading ${Math.floor((sent / (total || 1)) * 100)} %`
          }),
        )
        if (!blob) return
        if (blob.created) createdHere.push(blob.blob_id)
        pct.textContent = `done: ${blob.blob_id}${sealed ? ' (encrypted)' : ''}`
        // an encrypted attachment goes without its name: the relay would see it in the clear (docs/protocol.md §14.5)
        attachments.push(sealed ? { blob_id: blob.blob_id, encrypted: true, dek_enc: sealed.dek_enc, dek_ct: sealed.dek_ct } : { blob_id: blob.blob_id, filename: file.name })
      }
      const message: Record<string, unknown> = { recipient_key: recipient, content_type: kind.value === 'json' ? 'application/json' : 'text/plain' }
      if (parsedBody !== undefined) message.body = parsedBody
      if (attachments.length) message.attachments = attachments
      if (thread.value) message.thread_id = thread.value
      if (reply.value) message.in_reply_to = reply.value
      let sent: any
      try {
        sent = await call(ctx.id, 'POST', '/v1/messages', version ? await sealForSend(ctx.id, message, version) : message)
      } catch (err) {
        // the recipient's inbox takes encrypted messages only: send again encrypted, unless plaintext was asked for
        if (err instanceof ApiError && err.code === 'encryption_required' && !version && !plain.checked && !force) {
          forgetDeclaration(recipient)
          // the plaintext files this attempt uploaded must not stay on the relay (those the agent already had do)
          for (const blobId of createdHere) await call(ctx.id, 'DELETE', `/v1/blobs/${encodeURIComponent(blobId)}`).catch(() => {})
          ctx.notify('The recipient accepts only encrypted messages: sending it encrypted')
          submit.disabled = false
          return send(true)
        }
        const e = err as { code?: string; message?: string }
        return ctx.notify(`Sending failed: ${e.message ?? String(err)}${e.code ? ` (${e.code})` : ''}`, 'error')
      }
      ctx.sent.add(sent.message_id)
      const how = version ? `end-to-end encrypted, v${version}` : 'plaintext'
      ctx.notify(`Sent ${sent.message_id} (${how})`, 'ok')
      fill(
        result,
        h(
          'p',
          {},
          'Sent ',
          h('code', { class: 'sent-id' }, sent.message_id),
          ' ',
          h('span', { class: 'sent-how' }, `(${how})`),
          ' ',
          h('button', { type: 'button', onclick: () => ctx.go('status', { id: sent.message_id }) }, 'Status'),
        ),
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
      field('Attachments', files, 'Each file is uploaded as a blob first, then attached; when the message is encrypted, encrypted in this browser first and sent without its name (the relay would see it).'),
      progress,
      h('div', { class: 'field check' }, encrypt, h('label', { for: 'send-encrypt' }, 'Encrypt even if the recipient declares no support (v2, which MRP agents read)')),
      h('div', { class: 'field check' }, plain, h('label', { for: 'send-plain' }, 'Send in plaintext (no end-to-end encryption)')),
      encryption,
      h('details', {}, h('summary', {}, 'Thread and reply'), field('Thread id', thread), field('In reply to (message id)', reply)),
      submit,
    ),
    result,
  )
  ;(arg.to ? body : to).focus()
  if (arg.to) void describe()
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
