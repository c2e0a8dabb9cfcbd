/**
 * /v1/blobs (docs/protocol.md §6). Uploads are streamed: the pipeline leaves their body unread and checks only
 * the signature headers and timestamp (`auth: 'upload'`); the route hands the body stream to the
 * service with `upload.verify`, which finishes authentication once the streamed hash is known.
 *
 * GET and HEAD share one handler (the GET route declares `head`): Elysia answers HEAD on a path with parameters by running its GET
 * handler and counting the body for Content-Length, so a HEAD gets a body that costs nothing to count
 * (see `lengthOnly`), never the file.
 */
import { Elysia } from 'elysia'
import { routeAuth } from '../route-auth.ts'
import { RelayError, badRequest } from '../../errors.ts'
import type { BlobsService } from '../../services/blobs.ts'
import { BlobResult } from '../../services/models/blob.ts'
import { doc, jsonResponse, pathParam } from '../openapi-docs.ts'
import { rawQuery } from '../query.ts'
import { parseRange } from '../range.ts'

const storageHeaders = {
  'X-M2M-Storage-Used': { schema: { type: 'integer' }, description: 'bytes of your unexpired blobs, this one included' },
  'X-M2M-Storage-Limit': { schema: { type: 'integer' }, description: 'your quota in bytes' },
}

const blobHeaders = {
  'Content-Type': { schema: { type: 'string' }, description: 'as uploaded' },
  'X-Content-Type-Options': { schema: { type: 'string' }, description: 'nosniff' },
  'Content-Disposition': { schema: { type: 'string' }, description: 'attachment, for types a browser would render or run (HTML, SVG, XML, scripts)' },
  'Content-Length': { schema: { type: 'integer' } },
  ETag: { schema: { type: 'string' }, description: '"<sha256 hex>"' },
  'X-M2M-Blob-Hash': { schema: { type: 'string' }, description: 'SHA-256 hex of the whole blob' },
}

/**
 * Types a browser would render or run (HTML, SVG, XML, scripts…). Downloads need a signature, so a
 * browser cannot simply be sent to one; still, such blobs are served as attachments, and every
 * download carries nosniff and a sandboxing CSP, so uploaded bytes never act as a page of the relay.
 */
const ACTIVE_TYPE = /^(?:text\/html|application\/xhtml\+xml|image\/svg\+xml|text\/xml|application\/xml|text\/xsl|[a-z0-9.+-]+\/[a-z0-9.+-]*\+xml|(?:text|application)\/(?:x-)?(?:java|ecma)script|text\/jscript|multipart\/x-mixed-replace)$/
const MIME_TYPE = /^[a-z0-9!#$&^_.+-]+\/[a-z0-9!#$&^_.+-]+$/

/** Headers that keep a download inert; a type that is active or cannot be read as one type is an attachment. */
function inertHeaders(contentType: string): Record<string, string> {
  const essence = contentType.split(';')[0].trim().toLowerCase()
  const headers: Record<string, string> = { 'x-content-type-options': 'nosniff', 'content-security-policy': "default-src 'none'; sandbox" }
  if (!MIME_TYPE.test(essence) || ACTIVE_TYPE.test(essence)) headers['content-disposition'] = 'attachment'
  return headers
}

const rawBytes = (description: string) => ({ description, headers: blobHeaders, content: { '*/*': { schema: { type: 'string', format: 'binary' } } } })

export function blobRoutes(blobs: BlobsService) {
  return new Elysia({ name: 'routes-blobs' })
    .use(routeAuth)
    .post(
      '/v1/blobs',
      async ({ upload, request, set }) => {
        const outcome = await blobs.upload({
          body: request.body,
          contentLength: request.headers.get('content-length'),
          contentType: request.headers.get('content-type'),
          query: queryForUpload(request),
          claimedKey: upload.claimedKey,
          verify: upload.verify,
          rate: upload.rate,
        })
        Object.assign(set.headers, outcome.headers)
        set.status = outcome.created ? 201 : 200
        return outcome.blob
      },
      {
        auth: 'upload',
        detail: doc({
          tags: ['blobs'],
          summary: 'Upload raw bytes (streamed; signed over the SHA-256 of the bytes)',
          description:
            'Any Content-Type (default application/octet-stream). 201 for a new blob, 200 with the existing one when you ' +
            'already own identical content. 413 over the size limit (at once when Content-Length says so), 507 over your quota.',
          requestBody: { required: true, content: { '*/*': { schema: { type: 'string', format: 'binary' } } } },
          responses: {
            201: jsonResponse(BlobResult, 'Stored', storageHeaders),
            200: jsonResponse(BlobResult, 'You already own this content', storageHeaders),
          },
        }),
      },
    )
    .get(
      '/v1/blobs/:blobID',
      async ({ caller, request, params }) => {
        
        noQuery(request)
        const { row } = await blobs.open(caller.publicKey, params.blobID)
        const size = row.sizeBytes
        const headers: Record<string, string> = {
          'content-type': row.contentType,
          etag: `"${row.hash}"`,
          'x-m2m-blob-hash': row.hash,
          'accept-ranges': 'bytes',
          'cache-control': 'private, no-cache',
          ...inertHeaders(row.contentType),
        }
        const range = parseRange(request.headers.get('range'), size)
        if (range.kind === 'unsatisfiable') {
          throw new RelayError('range_not_satisfiable', `The range selects no byte of this blob (${size} bytes)`, { size }, { 'content-range': `bytes */${size}` })
        }
        const head = request.method === 'HEAD'
        if (range.kind === 'partial') {
          const length = range.end - range.start + 1
          headers['content-range'] = `bytes ${range.start}-${range.end}/${size}`
          headers['content-length'] = String(length)
          return new Response(head ? lengthOnly(length) : await blobs.read(row, range), { status: 206, headers })
        }
        headers['content-length'] = String(size)
        if (head) return new Response(lengthOnly(size), { status: 200, headers })
        // the server applies a Range header to a file body by itself (a bare 416 for one it finds
        // unsatisfiable, where this route ignores it); a Range ignored here is served through a
        // stream of our own, which it leaves alone
        const bytes = await blobs.read(row)
        const whole = request.headers.has('range') ? opaqueStream(bytes instanceof Blob ? bytes.stream() : bytes) : bytes
        return new Response(whole, { status: 200, headers })
      },
      {
        auth: { mode: 'agent', head: true },
        detail: doc({
          tags: ['blobs'],
          summary: 'Download a blob (owner, or sender/recipient of an unexpired message attaching it); HEAD for headers only',
          description: 'One byte range per request (`Range: bytes=A-B`, `A-`, `-N`) → 206; a range beyond the end → 416; other Range values are ignored.',
          parameters: [pathParam('blobID'), { name: 'Range', in: 'header', required: false, schema: { type: 'string' } }],
          responses: { 200: rawBytes('The bytes'), 206: rawBytes('The requested range') },
        }),
      },
    )
    .delete(
      '/v1/blobs/:blobID',
      async ({ caller, request, params, set }) => {
        
        noQuery(request)
        await blobs.delete(caller.publicKey, params.blobID)
        set.status = 204
        return null
      },
      {
        auth: 'agent',
        detail: doc({
          tags: ['blobs'],
          summary: 'Delete your blob (not while an unexpired message attaches it)',
          parameters: [pathParam('blobID')],
          responses: { 204: { description: 'Deleted' } },
        }),
      },
    )
}

/**
 * An upload takes no query parameter; the service refuses any once the signature is verified. A
 * parameter that does not even decode is handed over by name, so that it too is refused only then.
 */
function queryForUpload(request: Request): Record<string, string | string[]> {
  try {
    return rawQuery(request)
  } catch (err) {
    const fields = (err as RelayError).details as { fields?: Record<string, string> } | null
    return Object.fromEntries(Object.keys(fields?.fields ?? { query: '' }).map((name) => [name, '']))
  }
}

function noQuery(request: Request): void {
  const names = Object.keys(rawQuery(request))
  if (names.length) throw badRequest('Invalid query parameters', Object.fromEntries(names.map((n) => [n, 'unknown parameter'])))
}

/** The same bytes through a plain JavaScript stream, so the server does not treat the body as a file. */
function opaqueStream(source: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
  const reader = source.getReader()
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const { done, value } = await reader.read()
      if (done) controller.close()
      else controller.enqueue(value)
    },
    cancel: (reason) => reader.cancel(reason),
  })
}

/** Shared zeros that `lengthOnly` hands out; never written to a socket (HEAD answers carry no body). */
let zeros: Uint8Array | undefined
const ZERO_CHUNK = 1024 * 1024

/**
 * A body of `length` bytes that reads no file: for HEAD, which Elysia answers by counting the GET
 * body. Bun sends no body for a HEAD request, so the bytes themselves never leave the process.
 */
function lengthOnly(length: number): ReadableStream<Uint8Array> | null {
  if (length === 0) return null
  let left = length
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      zeros ??= new Uint8Array(ZERO_CHUNK)
      const n = Math.min(left, ZERO_CHUNK)
      controller.enqueue(zeros.subarray(0, n))
      left -= n
      if (left === 0) controller.close()
    },
  })
}
