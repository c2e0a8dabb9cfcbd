/**
 * Files by local path: upload one to get a blob id to attach, download a blob to a file. The bytes go
 * between the relay and the disk; the model sees paths, sizes and hashes, never the content.
 */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { z } from 'zod'
import type { Bridge } from '../bridge.ts'
import { BlobId, DateTime } from '../schemas.ts'
import { WRITES, defineTool } from '../tool.ts'

export function registerFileTools(server: McpServer, bridge: Bridge): void {
  defineTool(server, 'relay_upload', {
    title: 'Upload a file',
    description:
      'Uploads a local file to the relay and returns its blob id, to attach to messages (relay_send also takes paths directly). ' +
      'An unattached blob expires after a day by default. Uploading the same content again returns the same blob.',
    input: {
      path: z.string().min(1).max(4096).describe('the local file (relative paths are relative to where the bridge runs)'),
      content_type: z.string().max(255).optional().describe('default: from the file name'),
    },
    output: { blob_id: z.string(), path: z.string(), size: z.number().int(), sha256: z.string(), content_type: z.string(), expires_at: DateTime },
    annotations: WRITES,
    run: async ({ path, content_type }) => {
      const blob = await bridge.upload(path, content_type)
      return { blob_id: blob.blob_id, path: blob.path, size: blob.size, sha256: blob.hash, content_type: blob.content_type, expires_at: blob.expires_at }
    },
  })

  defineTool(server, 'relay_download', {
    title: 'Download a file',
    description:
      'Saves a blob (an attachment of a message to or from you, or your own upload) to a local file and returns its path, size ' +
      'and SHA-256 (checked). Without path it goes to the download directory of the bridge; a directory as path keeps the blob id ' +
      'as the file name. An existing file is not replaced unless overwrite is true.',
    input: {
      blob_id: BlobId,
      path: z.string().min(1).max(4096).optional().describe('where to write: a file, or a directory'),
      overwrite: z.boolean().optional().describe('replace an existing file (default false)'),
    },
    output: { blob_id: z.string(), path: z.string(), size: z.number().int(), sha256: z.string(), content_type: z.string() },
    annotations: WRITES,
    run: async ({ blob_id, path, overwrite }) => {
      const file = await bridge.download(blob_id, path, overwrite ?? false)
      return { blob_id, path: file.path, size: file.size, sha256: file.sha256, content_type: file.content_type }
    },
  })
}
