import { createHash, randomBytes } from 'node:crypto'
import { open, rename, unlink } from 'node:fs/promises'
import { decryptedBlobSize } from '../../client/index.ts'
import { fields, humanBytes } from '../format.ts'
import { createProgress } from '../progress.ts'
import { UsageError, type CommandContext, type CommandSpec } from './command.ts'

export const download: CommandSpec = {
  name: 'download',
  args: 'BLOB_ID',
  minArgs: 1,
  maxArgs: 1,
  summary: 'download a blob you own or that a message to or from you attaches',
  description:
    'Writes to a temporary file beside FILE and renames it once the bytes match the blob\'s SHA-256, so\n' +
    'FILE is never left half-written. "-o -" writes to standard output. A progress bar shows on a terminal.\n' +
    'With --message MESSAGE_ID, an end-to-end encrypted attachment of that message is decrypted on the way\n' +
    '(constant memory); a blob changed or cut anywhere is refused with the reason and no file is kept.',
  flags: [
    { name: 'out', value: 'FILE', help: 'where to write (short: -o; - for standard output); required' },
    { name: 'message', value: 'MESSAGE_ID', help: 'the message that attaches the blob: an encrypted attachment is then decrypted' },
  ],
  async run(ctx) {
    const out = ctx.flags.out
    if (!out) throw new UsageError('--out FILE (or -o FILE) is required; use "-o -" for standard output')
    const blobId = ctx.args[0]
    const client = ctx.client()
    let body: AsyncIterable<Uint8Array>
    let size: number
    let expected: string | null
    let contentType: string
    let decrypting = false
    const message = ctx.flags.message === undefined ? null : await client.getMessage(ctx.flags.message)
    const attachment = message?.attachments?.find((a) => a.blob_id === blobId)
    if (message && !attachment) throw new UsageError(`message ${message.message_id} does not attach ${blobId}`)
    if (message && attachment?.encrypted && out !== '-') {
      // into a file: the client decrypts and writes in batches, keeping the file only once every segment authenticated
      const progress = createProgress({ label: `download+decrypt ${blobId}`, total: decryptedBlobSize(attachment.size) ?? undefined, stream: ctx.stderr })
      let written: number
      try {
        written = (await client.downloadDecryptedToFile(message, attachment, out, { overwrite: true, onProgress: (n) => progress.set(n) })).size
        progress.done()
      } catch (err) {
        progress.fail()
        throw err
      }
      return report(ctx, { blobId, out, written, contentType: 'application/octet-stream', expected: null, decrypting: true })
    }
    if (message && attachment?.encrypted) {
      // AES-GCM authenticates every segment: a changed or cut blob fails here, the file is never kept
      body = (await client.downloadDecrypted(message, attachment)) as unknown as AsyncIterable<Uint8Array>
      size = decryptedBlobSize(attachment.size) ?? NaN
      expected = null
      contentType = 'application/octet-stream'
      decrypting = true
    } else {
      const res = await client.downloadBlob(blobId)
      body = res.body as unknown as AsyncIterable<Uint8Array>
      size = Number(res.headers.get('content-length') ?? NaN)
      expected = res.headers.get('x-m2m-blob-hash')
      contentType = res.headers.get('content-type') ?? 'application/octet-stream'
    }
    const progress = createProgress({ label: `${decrypting ? 'download+decrypt' : 'download'} ${blobId}`, total: Number.isFinite(size) ? size : undefined, stream: ctx.stderr })
    const hash = createHash('sha256')
    const toStdout = out === '-'
    const temp = toStdout ? null : `${out}.part-${randomBytes(4).toString('hex')}`
    const file = temp ? await open(temp, 'wx', 0o644) : null
    let written = 0
    try {
      for await (const chunk of body) {
        hash.update(chunk)
        if (file) {
          let view = chunk
          while (view.byteLength) view = view.subarray((await file.write(view)).bytesWritten)
        } else {
          await new Promise<void>((resolve, reject) => process.stdout.write(chunk, (err) => (err ? reject(err) : resolve())))
        }
        written += chunk.byteLength
        progress.set(written)
      }
      const got = hash.digest('hex')
      if (expected && got !== expected) throw new Error(`download of ${blobId} is corrupt: SHA-256 ${got}, expected ${expected}`)
      if (file) {
        await file.sync()
        await file.close()
        await rename(temp as string, out)
      }
      progress.done()
    } catch (err) {
      progress.fail()
      await file?.close().catch(() => {})
      if (temp) await unlink(temp).catch(() => {})
      throw err
    }
    if (toStdout) return
    report(ctx, { blobId, out, written, contentType, expected, decrypting })
  },
}

function report(ctx: CommandContext, r: { blobId: string; out: string; written: number; contentType: string; expected: string | null; decrypting: boolean }): void {
  const { blobId, out, written, contentType, expected, decrypting } = r
  const result = { blob_id: blobId, file: out, size: written, content_type: contentType, hash: expected, ...(decrypting ? { decrypted: true } : {}) }
  if (ctx.json) return ctx.out.json(result)
  ctx.out.text(
    fields([
      ['wrote', out],
      ['size', `${humanBytes(written)} (${written} bytes)`],
      ['content type', contentType],
      ['sha256', expected ?? undefined],
      ['decrypted', decrypting ? 'yes: every segment authenticated' : undefined],
    ]),
  )
}
