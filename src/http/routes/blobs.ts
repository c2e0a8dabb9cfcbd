/**
 * /v1/blobs (SPEC §6). Uploads are streamed: the pipeline leaves their body unread and checks only
 * the signature headers and timestamp (markStreamedBody); the route hands the body stream to the
 * service with a function that finishes authentication once the streamed hash is known.
 *
 * GET and HEAD share one handler: Elysia answers HEAD on a path with parameters by running its GET
 * handler and counting the body for Content-Length, so a HEAD gets a body that costs nothing to count
 * (see `lengthOnly`), never the file.
 */
import { Elysia } from 'elysia'
import { canonicalString } from '../../auth/canonical.ts'
import { RelayError, badRequest } from '../../errors.ts'
import type { Authenticator } from '../../services/authenticator.ts'
import type { BlobsService } from '../../services/blobs.ts'
import { BlobResult } from '../../services/models/blob.ts'
import { callerOf, markStreamedBody } from '../app.ts'
import { doc, errorResponses, jsonResponse, pathParam } from '../openapi-docs.ts'
import { rawQuery } from '../query.ts'
import { parseRange } from '../range.ts'
import { pathWithQuery } from '../../lib/url.ts'
import { stateOf } from '../request-state.ts'

const storageHeaders = {
  'X-M2M-Storage-Used': { schema: { type: 'integer' }, description: 'bytes of your unexpired blobs, this one included' },
  'X-M2M-Storage-Limit': { schema: { type: 'integer' }, description: 'your quota in bytes' },
}

const blobHeaders = {
  'Content-Type': { schema: { type: 'string' }, description: 'as uploaded' },
  'Content-Length': { schema: { type: 'integer' } },
  ETag: { schema: { type: 'string' }, description: '"<sha256 hex>"' },
  'X-M2M-Blob-Hash': { schema: { type: 'string' }, description: 'SHA-256 hex of the whole blob' },
}

const rawBytes = (description: string) => ({ description, headers: blobHeaders, content: { '*/*': { schema: { type: 'string', format: 'binary' } } } })

export function blobRoutes(blobs: BlobsService, authenticator: Authenticator) {
  markStreamedBody('/v1/blobs')
  // Elysia matches a trailing slash to the same route; it must not be read as a JSON body either
  markStreamedBody('/v1/blobs/')

  return new Elysia({ name: 'routes-blobs' })
    .post(
      '/v1/blobs',
      async ({ request, set }) => {
        const state = stateOf(request)
        const pre = state?.pendingAuth
        if (!state || !pre) throw new RelayError('unauthorized', 'Authentication required')
        const target = pathWithQuery(request.url)
        const outcome = await blobs.upload({
          body: request.body,
          contentLength: request.headers.get('content-length'),
          contentType: request.headers.get('content-type'),
          query: rawQuery(request),
          claimedKey: pre.publicKey,
          verify: async (hash) => {
            state.agent = await authenticator.finish(pre, canonicalString(request.method, target, pre.timestamp, hash))
            return state.agent.publicKey
          },
        })
        Object.assign(set.headers, outcome.headers)
        set.status = outcome.created ? 201 : 200
        return outcome.blob
      },
      {
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
            ...errorResponses(400, 401, 403, 409, 413, 507),
          },
        }),
      },
    )
    .get(
      '/v1/blobs/:blobID',
      async ({ request, params }) => {
        const caller = callerOf(request)
        noQuery(request)
        const { row, path } = await blobs.open(caller.publicKey, params.blobID)
        const size = row.sizeBytes
        const headers: Record<string, string> = {
          'content-type': row.contentType,
          etag: `"${row.hash}"`,
          'x-m2m-blob-hash': row.hash,
          'accept-ranges': 'bytes',
          'cache-control': 'private, no-cache',
        }
        const range = parseRange(request.headers.get('range'), size)
        if (range.kind === 'unsatisfiable') {
          throw new RelayError('range_not_satisfiable', `The range selects no byte of this blob (${size} bytes)`, { size }, { 'content-range': `bytes */${size}` })
        }
        const head = request.method === 'HEAD'
        const file = Bun.file(path)
        if (range.kind === 'partial') {
          const length = range.end - range.start + 1
          headers['content-range'] = `bytes ${range.start}-${range.end}/${size}`
          headers['content-length'] = String(length)
          return new Response(head ? lengthOnly(length) : file.slice(range.start, range.end + 1), { status: 206, headers })
        }
        headers['content-length'] = String(size)
        return new Response(head ? lengthOnly(size) : file, { status: 200, headers })
      },
      {
        detail: doc({
          tags: ['blobs'],
          summary: 'Download a blob (owner, or sender/recipient of an unexpired message attaching it); HEAD for headers only',
          description: 'One byte range per request (`Range: bytes=A-B`, `A-`, `-N`) → 206; a range beyond the end → 416; other Range values are ignored.',
          parameters: [pathParam('blobID'), { name: 'Range', in: 'header', required: false, schema: { type: 'string' } }],
          responses: { 200: rawBytes('The bytes'), 206: rawBytes('The requested range'), ...errorResponses(401, 403, 404, 409, 416) },
        }),
      },
    )
    .delete(
      '/v1/blobs/:blobID',
      ({ request, params, set }) => {
        const caller = callerOf(request)
        noQuery(request)
        blobs.delete(caller.publicKey, params.blobID)
        set.status = 204
        return null
      },
      {
        detail: doc({
          tags: ['blobs'],
          summary: 'Delete your blob (not while an unexpired message attaches it)',
          parameters: [pathParam('blobID')],
          responses: { 204: { description: 'Deleted' }, ...errorResponses(401, 403, 404, 409) },
        }),
      },
    )
}

function noQuery(request: Request): void {
  const names = Object.keys(rawQuery(request))
  if (names.length) throw badRequest('Invalid query parameters', Object.fromEntries(names.map((n) => [n, 'unknown parameter'])))
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
