import { basename } from 'node:path'
import { readJson, type RelayClient, type SendMessageInput, type SendResultJson } from '../../client/index.ts'
import { fields } from '../format.ts'
import { UsageError, type CommandContext, type CommandSpec, type FlagSpec } from './command.ts'
import { inlineOrFile } from './profile.ts'
import { uploadFile } from './transfer.ts'

const KEY = /^[A-Za-z0-9_-]{43}$/

/** `--no-retry` of send and poll: answers 429 are otherwise waited out (Retry-After) a few times. */
export const NO_RETRY_FLAG: FlagSpec = { name: 'no-retry', help: 'fail at once when rate limited (429) instead of waiting Retry-After and retrying (3 times)' }

/** The client for send and poll: retries 429 with a note on standard error, unless --no-retry. */
export function retryingClient(ctx: CommandContext): RelayClient {
  const client = ctx.client()
  if (ctx.flags['no-retry'] === 'true') client.transport.rateLimitRetry = { ...client.transport.rateLimitRetry, retries: 0 }
  const retries = client.transport.rateLimitRetry.retries
  client.transport.onRateLimited = (i) => ctx.out.note(`rate limited; retrying in ${Math.ceil(i.waitMs / 1000)} s (${i.attempt}/${retries})\n`)
  return client
}

export const send: CommandSpec = {
  name: 'send',
  maxArgs: 0,
  summary: 'send a message: a JSON body, a text, attached files, or both',
  description:
    'Each --attach FILE is uploaded first (with a progress bar on a terminal) and attached with its file\n' +
    'name; --blob BLOB_ID attaches a blob uploaded before (relay upload). The relay fills in each\n' +
    "attachment's content type, size and hash. --body takes JSON inline, as @FILE, or @-\n" +
    'for standard input, and sends that text as given (numbers, escapes and key order unchanged);\n' +
    '--text "hi" is the body {"text": "hi"}.',
  flags: [
    { name: 'to', value: 'KEY', help: "the recipient's public key (required)" },
    { name: 'body', value: 'JSON|@FILE', help: 'the message body, any JSON' },
    { name: 'text', value: 'TEXT', help: 'shorthand for the body {"text": TEXT}' },
    { name: 'attach', value: 'FILE', help: 'upload FILE and attach it', repeatable: true },
    { name: 'blob', value: 'BLOB_ID', help: 'attach a blob you already uploaded (relay upload prints its id)', repeatable: true },
    { name: 'thread', value: 'ID', help: 'thread id (at most 128 characters)' },
    { name: 'reply-to', value: 'MESSAGE_ID', help: 'the message this answers (joins its thread)' },
    { name: 'ttl', value: 'SECONDS', help: 'lifetime, 1–2592000 (default 604800 = 7 days)' },
    { name: 'content-type', value: 'TYPE', help: 'content type of the body (default application/json)' },
    { name: 'metadata', value: 'JSON|@FILE', help: 'a JSON object (at most 16 KiB)' },
    NO_RETRY_FLAG,
  ],
  async run(ctx) {
    const f = ctx.flags
    if (!f.to) throw new UsageError('--to KEY is required')
    if (!KEY.test(f.to)) throw new UsageError('--to must be a public key: 43 base64url characters')
    if (f.body !== undefined && f.text !== undefined) throw new UsageError('give --body or --text, not both')
    const files = ctx.lists.attach ?? []
    const blobIds = ctx.lists.blob ?? []
    if (f.body === undefined && f.text === undefined && files.length === 0 && blobIds.length === 0) {
      throw new UsageError('nothing to send: give --body, --text, --attach or --blob')
    }
    const message: SendMessageInput = { recipient_key: f.to }
    if (f.text !== undefined) message.body = { text: f.text }
    // --body goes on the wire as given: parsing and re-serialising would change numbers beyond 2^53,
    // the spelling of escapes and key order
    let rawBody: string | undefined
    if (f.body !== undefined) {
      rawBody = (await inlineOrFile(f.body)).trim()
      parseJson(rawBody, 'body')
    }
    if (f.thread !== undefined) message.thread_id = f.thread
    if (f['reply-to'] !== undefined) message.in_reply_to = f['reply-to']
    if (f['content-type'] !== undefined) message.content_type = f['content-type']
    if (f.ttl !== undefined) {
      const ttl = Number(f.ttl)
      if (!Number.isInteger(ttl) || ttl < 1 || ttl > 2_592_000) throw new UsageError('--ttl must be an integer number of seconds, 1–2592000')
      message.expires_in = ttl
    }
    if (f.metadata !== undefined) {
      const metadata = parseJson(await inlineOrFile(f.metadata), 'metadata')
      if (!metadata || typeof metadata !== 'object' || Array.isArray(metadata)) throw new UsageError('--metadata must be a JSON object')
      message.metadata = metadata as Record<string, unknown>
    }
    const client = retryingClient(ctx)
    if (files.length || blobIds.length) {
      message.attachments = blobIds.map((blob_id) => ({ blob_id }))
      for (const file of files) {
        const blob = await uploadFile(ctx, client, file)
        message.attachments.push({ blob_id: blob.blob_id, filename: basename(file) })
      }
    }
    const text = requestText(message, rawBody)
    const res = await client.transport.sendWithRetry('POST', '/v1/messages', () =>
      client.transport.buildRequest('POST', '/v1/messages', text, { 'content-type': 'application/json' }),
    )
    const result = await readJson<SendResultJson>(res, client.transport.baseUrl)
    if (ctx.json) return ctx.out.json(result)
    ctx.out.text(
      fields([
        ['message', result.message_id],
        ['status', result.status],
        ['created', result.created_at],
        ['expires', result.expires_at],
        ['attachments', message.attachments?.map((a) => (a.filename ? `${a.filename} (${a.blob_id})` : a.blob_id)).join(', ')],
      ]),
    )
  },
}

function parseJson(text: string, flag: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    throw new UsageError(`--${flag} is not valid JSON`)
  }
}

/** The JSON text of a send request, with the body given on the command line spliced in byte for byte. */
export function requestText(message: SendMessageInput, rawBody: string | undefined): string {
  if (rawBody === undefined) return JSON.stringify(message)
  // recipient_key first, as the relay's documentation shows it, then the body, then the rest
  const { recipient_key, ...others } = message
  const tail = JSON.stringify(others).slice(1)
  return `{"recipient_key":${JSON.stringify(recipient_key)},"body":${rawBody}${tail === '}' ? '}' : `,${tail}`}`
}
