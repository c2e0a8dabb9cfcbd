/**
 * Input checks of the messages service, shared by every path that reaches it (HTTP and WebSocket):
 * the send body (docs/protocol.md §4.3 checks 1–3, in order) and the query parameters of polls and thread listings.
 */
import { PUBLIC_KEY_PATTERN } from '../auth/keys.ts'
import { RelayError, badRequest, type FieldErrors } from '../errors.ts'
import { memberText } from '../lib/json-text.ts'
import type { InboxFilter, MessagePosition as Position } from './models/records.ts'
import { decodeCursor } from './cursor.ts'
import { MESSAGE_LIMITS, SendMessageShape, type AttachmentInput } from './models/message.ts'
import { Text, textProblem } from './models/text.ts'
import { isPlainObject, jsonKind, validate, withoutNulls } from './validate.ts'

export interface SendRequest {
  recipientKey: string
  contentType: string
  /** JSON text of `body` exactly as sent, or null when absent. */
  bodyText: string | null
  attachments: AttachmentInput[]
  threadId: string | null
  inReplyTo: string | null
  expiresInMs: number
  /** JSON text of `metadata` exactly as sent, or null when absent. */
  metadataText: string | null
}

const DEFAULT_CONTENT_TYPE = 'application/json'

/** Optional fields that MRP types as nullable: `null` is the same as leaving them out. */
const NULLABLE = ['content_type', 'attachments', 'thread_id', 'in_reply_to', 'expires_in', 'metadata'] as const

/**
 * The first three checks of a send: 413 when `body` exceeds 1 MiB as sent (the 2 MiB request cap is the HTTP
 * pipeline's, before parsing), 400 naming every offending field, 422 when there is neither a body
 * nor a non-empty attachments array. A JSON `null` body counts as no body, and `null` for any other
 * optional field as absent. `body` and `metadata` are kept as the exact JSON text sent (when `input`
 * came from parseJsonText), so every number, escape and space comes back unchanged.
 */
export function parseSendInput(input: unknown): SendRequest {
  if (!isPlainObject(input)) {
    throw badRequest('The request body must be a JSON object: {"recipient_key": "…", "body": …} with a body, attachments or both', {
      // a JSON null and an empty request body both arrive as null
      body: `must be a JSON object, not ${jsonKind(input ?? undefined)}`,
    })
  }
  let bodyText: string | null = null
  if (isPlainObject(input) && input.body !== undefined && input.body !== null) {
    bodyText = memberText(input, 'body')
    const bytes = Buffer.byteLength(bodyText)
    if (bytes > MESSAGE_LIMITS.bodyBytes) {
      throw new RelayError('payload_too_large', `Message body is ${bytes} bytes; the limit is ${MESSAGE_LIMITS.bodyBytes}`, {
        field: 'body',
        limit_bytes: MESSAGE_LIMITS.bodyBytes,
      })
    }
  }
  const msg = validate(SendMessageShape, bareBlobIds(withoutNulls(input, NULLABLE)))
  const attachments: AttachmentInput[] = msg.attachments ?? []
  const fields: FieldErrors = {}
  const metadataText = msg.metadata === undefined ? null : memberText(input as Record<string, unknown>, 'metadata')
  if (metadataText !== null && Buffer.byteLength(metadataText) > MESSAGE_LIMITS.metadataBytes) {
    fields.metadata = 'must be at most 16 KiB as sent'
  }
  attachments.forEach((a, i) => {
    for (const k of ['dek_enc', 'dek_ct'] as const) {
      const v = a[k]
      if (v !== undefined && Buffer.byteLength(v) > MESSAGE_LIMITS.dekBytes) fields[`attachments[${i}].${k}`] = 'must be at most 4 KiB'
    }
  })
  if (Object.keys(fields).length) throw badRequest('Invalid request body', fields)
  if (bodyText === null && attachments.length === 0) {
    throw new RelayError('unprocessable_entity', 'A message needs a body or at least one attachment')
  }
  return {
    recipientKey: msg.recipient_key,
    contentType: msg.content_type ?? DEFAULT_CONTENT_TYPE,
    bodyText,
    attachments,
    threadId: msg.thread_id ?? null,
    inReplyTo: msg.in_reply_to ?? null,
    expiresInMs: (msg.expires_in ?? MESSAGE_LIMITS.expiresInDefaultS) * 1000,
    metadataText,
  }
}

/** A bare blob id in `attachments` (what MRP's SDK sends) is an attachment with only its blob_id. */
function bareBlobIds(input: unknown): unknown {
  if (!isPlainObject(input) || !Array.isArray(input.attachments) || !input.attachments.some((a) => typeof a === 'string')) return input
  return { ...input, attachments: input.attachments.map((a) => (typeof a === 'string' ? { blob_id: a } : a)) }
}

/** Raw query parameters: a repeated name arrives as an array. */
export type RawQuery = Record<string, string | string[]>

export interface PageRequest {
  after: Position | null
  limit: number
}

export interface PollRequest extends PageRequest {
  filter: InboxFilter
}

const KEY = PUBLIC_KEY_PATTERN
const STATUSES = new Set(['sent', 'delivered', 'expired'])

type ParamRule = (value: string) => string | null

const THREAD_ID = Text({ minChars: 1, maxChars: MESSAGE_LIMITS.threadId })
const IN_REPLY_TO = Text({ minChars: 1, maxChars: MESSAGE_LIMITS.inReplyTo })

const PAGE_RULES: Record<string, ParamRule> = {
  cursor: (v) => (v.length ? null : 'must not be empty'),
  limit: (v) => (/^\d{1,3}$/.test(v) && +v >= 1 && +v <= MESSAGE_LIMITS.pageMax ? null : `must be an integer from 1 to ${MESSAGE_LIMITS.pageMax}`),
}

const POLL_RULES: Record<string, ParamRule> = {
  ...PAGE_RULES,
  status: (v) => (STATUSES.has(v) ? null : 'must be sent, delivered or expired'),
  sender_key: (v) => (KEY.test(v) ? null : 'must be a public key: 43 base64url characters'),
  in_reply_to: (v) => textProblem(IN_REPLY_TO, v),
  thread_id: (v) => textProblem(THREAD_ID, v),
}

/** Checks every parameter against `rules`; unknown or repeated parameters are errors (docs/protocol.md §11). */
function checkQuery(raw: RawQuery, rules: Record<string, ParamRule>): Record<string, string> {
  // no prototypes: a parameter named `__proto__` or `toString` is an unknown name like any other
  const fields: FieldErrors = Object.create(null)
  const out: Record<string, string> = Object.create(null)
  for (const [name, value] of Object.entries(raw)) {
    const rule = Object.hasOwn(rules, name) ? rules[name] : undefined
    if (!rule) fields[name] = 'unknown parameter'
    else if (Array.isArray(value)) fields[name] = 'must be given at most once'
    else {
      const problem = rule(value)
      if (problem) fields[name] = problem
      else out[name] = value
    }
  }
  if (Object.keys(fields).length) throw badRequest('Invalid query parameters', fields)
  return out
}

function pageOf(q: Record<string, string>): PageRequest {
  return {
    after: q.cursor === undefined ? null : decodeCursor(q.cursor),
    limit: q.limit === undefined ? MESSAGE_LIMITS.pageDefault : Number(q.limit),
  }
}

/** GET /v1/messages parameters (docs/protocol.md §4.4); throws 400 naming each bad parameter. */
export function parsePollQuery(raw: RawQuery): PollRequest {
  const q = checkQuery(raw, POLL_RULES)
  const filter: InboxFilter = { status: (q.status ?? 'sent') as InboxFilter['status'] }
  if (q.sender_key) filter.senderKey = q.sender_key
  if (q.in_reply_to) filter.inReplyTo = q.in_reply_to
  if (q.thread_id) filter.threadId = q.thread_id
  return { ...pageOf(q), filter }
}

/** `cursor` and `limit` of a thread listing (docs/protocol.md §4.5). */
export function parsePageQuery(raw: RawQuery): PageRequest {
  return pageOf(checkQuery(raw, PAGE_RULES))
}

/** A thread id from a path: 1–128 characters of well-formed text, else 400. */
export function checkThreadId(threadId: string): string {
  const problem = textProblem(THREAD_ID, threadId)
  if (problem) throw badRequest('Invalid path parameters', { threadID: problem })
  return threadId
}
