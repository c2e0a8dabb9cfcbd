import { basename } from 'node:path'
import { readJson, type AttachmentInput, type RelayClient, type SendMessageInput, type SendResultJson } from '../../client/index.ts'
import { fields } from '../format.ts'
import { UsageError, type CommandContext, type CommandSpec, type FlagSpec } from './command.ts'
import { inlineOrFile } from './profile.ts'
import { uploadEncryptedFile, uploadFile } from './transfer.ts'

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
    '--text "hi" is the body {"text": "hi"}.\n' +
    'End to end encryption: to a recipient whose profile declares it reads encrypted messages, the body\n' +
    'and every --attach file are encrypted (v3 when it declares v3, else v2); --encrypt encrypts for any\n' +
    'recipient (v2, what MRP agents read, unless it declares v3); --plain sends plaintext. Encrypted files\n' +
    'are sent without their names. --blob ID:DEK_ENC:DEK_CT attaches a blob from relay upload --encrypt-for.\n' +
    'A plaintext send the relay refuses (encryption_required: the recipient or the relay takes encrypted\n' +
    'messages only) is sent again encrypted, --attach files included; not with --plain.',
  flags: [
    { name: 'to', value: 'KEY', help: "the recipient's public key (required)" },
    { name: 'body', value: 'JSON|@FILE', help: 'the message body, any JSON' },
    { name: 'text', value: 'TEXT', help: 'shorthand for the body {"text": TEXT}' },
    { name: 'attach', value: 'FILE', help: 'upload FILE and attach it', repeatable: true },
    { name: 'blob', value: 'BLOB_ID', help: 'attach a blob you already uploaded (relay upload prints its id; ID:DEK_ENC:DEK_CT for an encrypted one)', repeatable: true },
    { name: 'encrypt', help: 'encrypt end to end even if the recipient declares nothing' },
    { name: 'plain', help: 'send plaintext even to a recipient that declares encryption' },
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
    const to = f.to
    if (f.body !== undefined && f.text !== undefined) throw new UsageError('give --body or --text, not both')
    const files = ctx.lists.attach ?? []
    const blobIds = ctx.lists.blob ?? []
    if (f.body === undefined && f.text === undefined && files.length === 0 && blobIds.length === 0) {
      throw new UsageError('nothing to send: give --body, --text, --attach or --blob')
    }
    const message: SendMessageInput = { recipient_key: to }
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
    if (f.encrypt === 'true' && f.plain === 'true') throw new UsageError('give --encrypt or --plain, not both')
    const plain = f.plain === 'true'
    const client = retryingClient(ctx)
    // a plaintext send refused by an encrypted-only inbox is made again encrypted, files included
    const { result, version } = await client.encryption.sendWithFallback(to, { encrypt: f.encrypt === 'true' ? true : undefined, plain }, async (version) => {
      if (files.length || blobIds.length) {
        message.attachments = blobIds.map(blobReference)
        for (const file of files) {
          if (version) message.attachments.push((await uploadEncryptedFile(ctx, client, file, to, version)).attachment)
          else message.attachments.push({ blob_id: (await uploadFile(ctx, client, file)).blob_id, filename: basename(file) })
        }
      }
      // --body goes as given in plaintext; an encrypted body is sealed as parsed (the relay never sees its text)
      if (rawBody !== undefined && !version) return sendText(client, requestText(message, rawBody))
      if (rawBody !== undefined) message.body = parseJson(rawBody, 'body')
      // the version is decided here: encrypt false stops the client from looking again or retrying on its own
      return client.send({ ...message, encrypt: version ?? false })
    })
    if (ctx.json) return ctx.out.json(result)
    ctx.out.text(
      fields([
        ['message', result.message_id],
        ['status', result.status],
        ['created', result.created_at],
        ['expires', result.expires_at],
        ['encryption', version ? `end to end, v${version}` : plain ? 'none (--plain)' : 'none (the recipient declares none; --encrypt to encrypt)'],
        ['attachments', message.attachments?.map((a) => (a.filename ? `${a.filename} (${a.blob_id})` : a.blob_id)).join(', ')],
      ]),
    )
  },
}

/** Sends a request body exactly as given (see requestText). */
async function sendText(client: RelayClient, text: string): Promise<SendResultJson> {
  const res = await client.transport.sendWithRetry('POST', '/v1/messages', () =>
    client.transport.buildRequest('POST', '/v1/messages', text, { 'content-type': 'application/json' }),
  )
  return readJson<SendResultJson>(res, client.transport.baseUrl)
}

/** `--blob ID`, or `ID:DEK_ENC:DEK_CT` for an encrypted blob (base64url has no colon). */
function blobReference(ref: string): AttachmentInput {
  const [blob_id, dek_enc, dek_ct, ...rest] = ref.split(':')
  if (dek_enc === undefined) return { blob_id: blob_id! }
  if (!dek_ct || rest.length) throw new UsageError('--blob takes BLOB_ID or BLOB_ID:DEK_ENC:DEK_CT')
  return { blob_id: blob_id!, encrypted: true, dek_enc, dek_ct }
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
