import { createHash, randomBytes } from 'node:crypto'
import { open, rename, unlink } from 'node:fs/promises'
import { fields, humanBytes } from '../format.ts'
import { createProgress } from '../progress.ts'
import { UsageError, type CommandSpec } from './command.ts'

export const download: CommandSpec = {
  name: 'download',
  args: 'BLOB_ID',
  minArgs: 1,
  maxArgs: 1,
  summary: 'download a blob you own or that a message to or from you attaches',
  description:
    'Writes to a temporary file beside FILE and renames it once the bytes match the blob\'s SHA-256, so\n' +
    'FILE is never left half-written. "-o -" writes to standard output. A progress bar shows on a terminal.',
  flags: [{ name: 'out', value: 'FILE', help: 'where to write (short: -o; - for standard output); required' }],
  async run(ctx) {
    const out = ctx.flags.out
    if (!out) throw new UsageError('--out FILE (or -o FILE) is required; use "-o -" for standard output')
    const blobId = ctx.args[0]
    const res = await ctx.client().downloadBlob(blobId)
    const size = Number(res.headers.get('content-length') ?? NaN)
    const expected = res.headers.get('x-m2m-blob-hash')
    const contentType = res.headers.get('content-type') ?? 'application/octet-stream'
    const progress = createProgress({ label: `download ${blobId}`, total: Number.isFinite(size) ? size : undefined, stream: ctx.stderr })
    const hash = createHash('sha256')
    const toStdout = out === '-'
    const temp = toStdout ? null : `${out}.part-${randomBytes(4).toString('hex')}`
    const file = temp ? await open(temp, 'wx', 0o644) : null
    let written = 0
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
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
    const result = { blob_id: blobId, file: out, size: written, content_type: contentType, hash: expected }
    if (ctx.json) return ctx.out.json(result)
    ctx.out.text(fields([['wrote', out], ['size', `${humanBytes(written)} (${written} bytes)`], ['content type', contentType], ['sha256', expected ?? undefined]]))
  },
}
