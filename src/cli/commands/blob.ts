import { blobFields } from './transfer.ts'
import type { CommandSpec } from './command.ts'

export const blobInfo: CommandSpec = {
  name: 'blob info',
  args: 'BLOB_ID',
  minArgs: 1,
  maxArgs: 1,
  summary: "show a blob's size, content type and SHA-256 without downloading it",
  description: 'Works for blobs you own and blobs attached to a message you sent or received.',
  async run(ctx) {
    const info = await ctx.client().blobInfo(ctx.args[0])
    if (ctx.json) return ctx.out.json(info)
    ctx.out.text(blobFields(info))
  },
}

export const blobDelete: CommandSpec = {
  name: 'blob delete',
  args: 'BLOB_ID',
  minArgs: 1,
  maxArgs: 1,
  summary: 'delete a blob you uploaded (refused while an unexpired message attaches it)',
  async run(ctx) {
    await ctx.client().deleteBlob(ctx.args[0])
    if (ctx.json) return ctx.out.json({ deleted: ctx.args[0] })
    ctx.out.text(`deleted ${ctx.args[0]}\n`)
  },
}

export const blob = [blobInfo, blobDelete]
