/**
 * Blobs (SPEC §6) and message attachments (§4.1, §4.3 check 4): the file store, records, service,
 * routes, the cleanup job and start-up cleanup, health figures and upload metrics. Needs the messages
 * feature, whose sends it checks attachments for.
 */
import { BlobStore } from '../blobs/blob-store.ts'
import { blobRoutes } from '../http/routes/blobs.ts'
import { METRICS } from '../metrics/catalog.ts'
import type { FeatureContext } from '../relay.ts'
import { BlobSweeper } from '../services/blobs-sweep.ts'
import { BlobsService } from '../services/blobs.ts'
import type { MessagesService } from '../services/messages.ts'
import { BlobsRepo } from '../storage/blobs-repo.ts'

export const SWEEP_BLOBS_JOB = 'sweep-blobs'

export function installBlobs(ctx: FeatureContext, deps: { messages: MessagesService }) {
  const { config, paths, logger } = ctx
  const store = new BlobStore(paths.blobs, paths.tmp)
  store.ensureDirs()
  const repo = new BlobsRepo(ctx.db)
  const sweeper = new BlobSweeper(repo, store, logger)
  const uploaded = ctx.metrics.counter(METRICS.blobUploadedBytes)
  const blobs = new BlobsService({
    repo,
    store,
    clock: ctx.clock,
    logger,
    limits: config.blobs,
    onUploaded: (bytes) => uploaded.inc({}, bytes),
    onRecordRemoved: (hash) => sweeper.noteRemoved(hash),
  })
  deps.messages.setAttachmentResolver(blobs.resolveAttachments)
  deps.messages.onInsert(blobs.linkAttachments)

  // temp files first, synchronously, before any upload can start; the directory comparison may
  // take a while on a large store and runs alongside (uploads pin what they place)
  const startupCleanup = sweeper.startupCleanup().catch((err) => {
    logger.error('blob start-up cleanup failed', { error: String(err) })
    return { temp_files: 0, files_removed: 0 }
  })
  ctx.onStop.push(() => startupCleanup.then(() => {}))
  ctx.scheduler.add(SWEEP_BLOBS_JOB, config.sweepIntervalMs, (now) => sweeper.runOnce(now))

  ctx.health.component('blob_store', () => {
    const stored = repo.storedContents()
    const free = store.freeBytes()
    // degraded once the disk cannot take one more blob of the largest size
    const status = free !== null && free < config.blobs.maxSizeBytes ? 'degraded' : 'ok'
    return { status, bytes: stored.bytes, files: stored.files, free_bytes: free, uploads_in_flight: store.inFlight }
  })

  return { routes: blobRoutes(blobs, ctx.authenticator), blobs, repo, store, sweeper, startupCleanup }
}

export type BlobsFeature = ReturnType<typeof installBlobs>
