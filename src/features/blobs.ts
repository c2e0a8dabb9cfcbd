/**
 * Blobs (docs/protocol.md §6) and message attachments (§4.1, §4.3 check 4): the file store, records, service,
 * routes, the cleanup job and start-up cleanup, health figures and upload metrics. Needs the messages
 * feature, whose sends it checks attachments for.
 */
import type { BlobStore } from '../services/ports.ts'
import { blobRoutes } from '../http/routes/blobs.ts'
import { METRICS } from '../metrics/catalog.ts'
import { defineFeature, type FeatureContext } from './feature.ts'
import { BlobSweeper } from '../services/blobs-sweep.ts'
import { BlobsService } from '../services/blobs.ts'
import type { MessagesApi } from './messages.ts'

export const SWEEP_BLOBS_JOB = 'sweep-blobs'

export function blobsFeature(ctx: FeatureContext, deps: { messages: MessagesApi; store: BlobStore }) {
  const { config, paths, logger } = ctx
  const { store } = deps
  const storage = ctx.storage
  const sweeper = new BlobSweeper(storage, store, ctx.clock, logger)
  const uploaded = ctx.metrics.counter(METRICS.blobUploadedBytes)
  const blobs = new BlobsService({
    storage,
    store,
    clock: ctx.clock,
    logger,
    limits: config.blobs,
    onUploaded: (bytes) => uploaded.inc({}, bytes),
    onRecordRemoved: (hash) => sweeper.noteRemoved(hash),
    admits: (key) => ctx.admission.mayUse(key),
  })
  deps.messages.messages.setAttachmentResolver(blobs.resolveAttachments)

  // staging first, synchronously, before any upload can start; the comparison may take a while on a
  // large store and runs alongside (uploads claim what they place)
  const startupCleanup = sweeper.startupCleanup().catch((err) => {
    logger.error('blob start-up cleanup failed', { error: String(err) })
    return { temp_files: 0, files_removed: 0 }
  })

  return defineFeature({
    name: 'blobs',
    routes: blobRoutes(blobs),
    jobs: [{ name: SWEEP_BLOBS_JOB, intervalMs: config.sweepIntervalMs, exclusive: true, run: (now) => sweeper.runOnce(now) }],
    probes: {
      blob_store: async () => {
        const stored = await storage.blobs.storedContents()
        const free = await store.freeBytes()
        const problem = (await store.problem?.()) ?? null
        // degraded once the disk cannot take one more blob of the largest size, or the bucket fails
        const status = problem !== null || (free !== null && free < config.blobs.maxSizeBytes) ? 'degraded' : 'ok'
        return { status, kind: store.kind, ...(problem ? { error: problem } : {}), bytes: stored.bytes, files: stored.files, free_bytes: free, uploads_in_flight: store.inFlight, unverified_bytes: store.unverifiedBytes }
      },
    },
    readiness: { blob_store: () => store.ready() },
    on: {
      messageInserting: blobs.linkAttachments,
      // an agent deleted: its blobs that no unexpired message references go with it (docs/protocol.md §2.2)
      agentDeleting: async (tx, publicKey, now) => {
        for (const hash of await tx.blobs.removeOwnedUnreferenced(publicKey, now)) sweeper.noteRemoved(hash)
      },
    },
    stop: () => startupCleanup.then(() => {}),
    api: { blobs, store, sweeper, startupCleanup },
  })
}
