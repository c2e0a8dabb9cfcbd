/**
 * Files by local path: upload one to get a blob id to attach, download a blob to a file. The bytes go
 * between the relay and the disk; the model sees paths, sizes and hashes, never the content.
 */
import type { McpServer } from '@modelcontextprotocol/server'
import { z } from 'zod'
import type { Bridge } from '../bridge.ts'
import { BlobId, DateTime, MessageId } from '../schemas.ts'
import { defineTool } from '../tool.ts'

export function registerFileTools(server: McpServer, bridge: Bridge): void {
  defineTool(server, 'relay_upload', {
    title: 'Upload a file',
    description:
      'Uploads a local file to the relay and returns its blob id, to attach to messages (relay_send also takes paths directly). ' +
      `Only files inside the directories the user allowed are read (${bridge.files.roots.join(', ')}); key files and anything that ` +
      'looks like a private key are refused. An unattached blob expires after a day by default. Uploading the same content again returns the same blob.',
    input: {
      path: z.string().min(1).max(4096).describe('the local file (relative paths are relative to the first allowed directory)'),
      content_type: z.string().max(255).optional().describe('default: from the file name'),
    },
    output: { blob_id: z.string(), path: z.string(), size: z.number().int(), sha256: z.string(), content_type: z.string(), expires_at: DateTime },
    // an upload only adds a blob that expires unless attached; reading the file changes nothing
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    run: async ({ path, content_type }) => {
      const blob = await bridge.upload(path, content_type)
      return { blob_id: blob.blob_id, path: blob.path, size: blob.size, sha256: blob.hash, content_type: blob.content_type, expires_at: blob.expires_at }
    },
  })

  defineTool(server, 'relay_download', {
    title: 'Download a file',
    description:
      'Saves a blob (an attachment of a message to or from you, or your own upload) to a local file and returns its path, size ' +
      `and SHA-256 (checked). Files are written only inside the directories the user allowed (${bridge.files.roots.join(', ')}); ` +
      `without path it goes to ${bridge.files.downloadDir}. The file keeps the name the sender gave the attachment (made safe), ` +
      'or the blob id when no message names it (an end-to-end encrypted attachment travels without a name). ' +
      (bridge.files.allowOverwrite
        ? 'An existing file is replaced only when overwrite is true.'
        : 'An existing file is never replaced (the user has not allowed it): choose another path.'),
    input: {
      blob_id: BlobId,
      path: z.string().min(1).max(4096).optional().describe('where to write: a file, or a directory, inside the allowed directories'),
      message_id: MessageId.optional().describe('the message the attachment came with, to name the file as its sender did and to decrypt an encrypted one (found among pending messages when omitted)'),
      ...(bridge.files.allowOverwrite ? { overwrite: z.boolean().optional().describe('replace an existing file (default false)') } : {}),
    },
    output: {
      blob_id: z.string(),
      path: z.string(),
      size: z.number().int(),
      sha256: z.string(),
      content_type: z.string(),
      decrypted: z.boolean().describe('true when the attachment was end-to-end encrypted and the file holds its decrypted plaintext (size and sha256 are the plaintext\'s)'),
    },
    // a download creates a file; it is destructive only when it may replace one
    annotations: { readOnlyHint: false, destructiveHint: bridge.files.allowOverwrite, idempotentHint: false, openWorldHint: false },
    run: async ({ blob_id, path, message_id, ...rest }) => {
      const overwrite = (rest as { overwrite?: boolean }).overwrite ?? false
      const file = await bridge.download(blob_id, path, { overwrite, messageId: message_id })
      return { blob_id, path: file.path, size: file.size, sha256: file.sha256, content_type: file.content_type, decrypted: file.decrypted === true }
    },
  })
}
