import type { CommandSpec } from './command.ts'
import { blobFields, uploadFile } from './transfer.ts'

export const upload: CommandSpec = {
  name: 'upload',
  args: 'FILE',
  minArgs: 1,
  maxArgs: 1,
  summary: 'upload a file as a blob, to attach to messages',
  description:
    'Streams the file (hashed first: the signature covers its SHA-256). Content you already uploaded is not\n' +
    'stored twice: the same blob_id comes back. An unattached blob expires after 24 hours (by default).\n' +
    'A progress bar shows on a terminal.',
  flags: [{ name: 'content-type', value: 'TYPE', help: 'content type (default: from the file name, else application/octet-stream)' }],
  async run(ctx) {
    const blob = await uploadFile(ctx, ctx.client(), ctx.args[0], ctx.flags['content-type'])
    if (ctx.json) return ctx.out.json(blob)
    ctx.out.text(blobFields(blob))
  },
}
