/**
 * The operator API (/v1/admin/…, operator keys only) and the watch for operator changes made outside
 * this process: `relay admin` on the host, or another instance of a cluster.
 */
import { adminRoutes } from '../http/routes/admin.ts'
import type { RecentLog } from '../lib/recent-log.ts'
import type { TrafficLog } from '../lib/traffic.ts'
import { AdminService } from '../services/admin.ts'
import { defineFeature, type FeatureContext } from './feature.ts'

/** How often a running relay looks for operator suspensions made by `relay admin` (docs/protocol.md §13: within 1 s). */
const SUSPENSION_POLL_MS = 250

export function adminFeature(ctx: FeatureContext, deps: { recent: RecentLog; traffic: TrafficLog }) {
  const { storage, clock, agents, admission, signals, logger } = ctx
  const admin = new AdminService({ storage, clock, agents, admission, recent: deps.recent, traffic: deps.traffic })

  // operator changes written by another process (relay admin) or instance reach this relay here
  let changesSeen = clock.now()
  let watching = false
  const watchOperatorChanges = async () => {
    if (watching) return
    watching = true
    try {
      await admission.refresh()
      for (const row of await storage.agents.changedSince(changesSeen)) {
        changesSeen = Math.max(changesSeen, row.updatedAt)
        storage.agents.invalidate(row.publicKey)
        if (row.status === 'suspended') signals.agentGone(row.publicKey, 'suspended')
      }
    } catch (err) {
      logger.warn('reading operator changes failed', { error: String(err) })
    } finally {
      watching = false
    }
  }
  let timer: ReturnType<typeof setInterval> | undefined

  return defineFeature({
    name: 'admin',
    routes: adminRoutes(admin),
    start: () => {
      timer = setInterval(watchOperatorChanges, SUSPENSION_POLL_MS)
    },
    stop: () => clearInterval(timer),
    api: { admin, watchOperatorChanges },
  })
}
