/** File transfers shared by `upload`, `download` and `send --attach`: progress bars and content types. */
import { statSync } from 'node:fs'
import { basename } from 'node:path'
import { encryptedBlobSize, type BlobJson, type EncryptedUpload, type EncryptionVersion, type RelayClient } from '../../client/index.ts'
import { fields, humanBytes } from '../format.ts'
import { createProgress } from '../progress.ts'
import { UsageError, type CommandContext } from './command.ts'

/** A content type from the file name (Bun's table), or application/octet-stream. */
export function guessContentType(file: string): string {
  const type = Bun.file(file).type
  return type && type !== 'application/octet-stream' ? type : 'application/octet-stream'
}

function fileSize(file: string): number {
  try {
    const s = statSync(file)
    if (!s.isFile()) throw new Error('not a regular file')
    return s.size
  } catch (err) {
    throw new UsageError(`cannot read ${file}: ${(err as Error).message}`)
  }
}

/**
 * Encrypts one file for `recipientKey` and uploads the ciphertext, in constant memory, with a progress
 * bar over the bytes sent. The blob's content type is application/octet-stream, whatever the file.
 */
export async function uploadEncryptedFile(ctx: CommandContext, client: RelayClient, file: string, recipientKey: string, version?: EncryptionVersion): Promise<EncryptedUpload> {
  const size = fileSize(file)
  const progress = createProgress({ label: `encrypt+upload ${basename(file)}`, total: encryptedBlobSize(size), stream: ctx.stderr })
  try {
    const up = await client.uploadEncryptedBlob(file, { recipientKey, version, onProgress: (n) => progress.set(n) })
    progress.done()
    return up
  } catch (err) {
    progress.fail()
    throw err
  }
}

/** Uploads one file with a progress bar on a terminal (nothing when piped). */
export async function uploadFile(ctx: CommandContext, client: RelayClient, file: string, contentType?: string): Promise<BlobJson> {
  const size = fileSize(file)
  const progress = createProgress({ label: `upload ${basename(file)}`, total: size, stream: ctx.stderr })
  try {
    const blob = await client.uploadBlob(file, { contentType: contentType ?? guessContentType(file), onProgress: (n) => progress.set(n) })
    progress.done()
    return blob
  } catch (err) {
    progress.fail()
    throw err
  }
}

/** A blob as `relay upload` and `relay blob info` print it; fields a HEAD cannot know are left out. */
export function blobFields(blob: { blob_id: string; size: number; content_type: string; hash: string; created_at?: string; expires_at?: string }): string {
  return fields([
    ['blob', blob.blob_id],
    ['size', `${humanBytes(blob.size)} (${blob.size} bytes)`],
    ['content type', blob.content_type],
    ['sha256', blob.hash],
    ['created', blob.created_at],
    ['expires', blob.expires_at],
  ])
}
