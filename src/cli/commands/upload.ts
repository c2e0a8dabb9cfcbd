import { fields, humanBytes } from '../format.ts'
import { UsageError, type CommandSpec } from './command.ts'
import { blobFields, uploadEncryptedFile, uploadFile } from './transfer.ts'

export const upload: CommandSpec = {
  name: 'upload',
  args: 'FILE',
  minArgs: 1,
  maxArgs: 1,
  summary: 'upload a file as a blob, to attach to messages',
  description:
    'Streams the file (hashed first: the signature covers its SHA-256). Content you already uploaded is not\n' +
    'stored twice: the same blob_id comes back. An unattached blob expires after 24 hours (by default).\n' +
    'A progress bar shows on a terminal. --encrypt-for KEY encrypts the file end to end first (the relay\n' +
    'stores ciphertext; its size and hash are the ciphertext\'s) and prints how to attach it.',
  flags: [
    { name: 'content-type', value: 'TYPE', help: 'content type (default: from the file name, else application/octet-stream)' },
    { name: 'encrypt-for', value: 'KEY', help: "encrypt end to end for this recipient; prints the --blob reference to send it with" },
  ],
  async run(ctx) {
    const recipient = ctx.flags['encrypt-for']
    if (recipient !== undefined) {
      if (!/^[A-Za-z0-9_-]{43}$/.test(recipient)) throw new UsageError('--encrypt-for must be a public key: 43 base64url characters')
      if (ctx.flags['content-type'] !== undefined) throw new UsageError('an encrypted blob is application/octet-stream: leave out --content-type')
      const up = await uploadEncryptedFile(ctx, ctx.client(), ctx.args[0], recipient)
      if (ctx.json) return ctx.out.json(up)
      ctx.out.text(blobFields(up.blob))
      const a = up.attachment
      ctx.out.text(fields([['plaintext', `${humanBytes(up.plain_size)} (${up.plain_size} bytes), encrypted for ${recipient}`], ['send with', `--blob ${a.blob_id}:${a.dek_enc}:${a.dek_ct}`]]))
      return
    }
    const blob = await uploadFile(ctx, ctx.client(), ctx.args[0], ctx.flags['content-type'])
    if (ctx.json) return ctx.out.json(blob)
    ctx.out.text(blobFields(blob))
  },
}
