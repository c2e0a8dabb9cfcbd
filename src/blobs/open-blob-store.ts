/**
 * Chooses the blob store from the configuration: the data directory (the default), or an
 * S3-compatible bucket named by RELAY_BLOB_STORE=s3://bucket/prefix with the standard AWS variables.
 */
import type { Config } from '../config/config.ts'
import type { Clock } from '../lib/clock.ts'
import type { BlobStore } from '../services/ports.ts'
import { LocalBlobStore } from './local/local-blob-store.ts'
import { s3StoreFromUrl } from './s3/s3-blob-store.ts'

export function openBlobStore(config: Config, paths: { blobs: string; tmp: string }, clock: Clock, env: Record<string, string | undefined> = process.env): BlobStore {
  if (!config.blobs.store) return new LocalBlobStore(paths.blobs, paths.tmp, config.preauth.diskBytes)
  return s3StoreFromUrl(config.blobs.store, env, clock, { preAuthBytes: config.preauth.diskBytes })
}
