/**
 * Health and readiness (docs/protocol.md §10): the routes, and the components that belong to no other
 * feature — the database, the jobs, and what unauthenticated clients hold.
 */
import { healthRoutes } from '../http/routes/health.ts'
import type { Scheduler } from '../jobs/scheduler.ts'
import type { HealthService } from '../services/health.ts'
import { defineFeature, type FeatureContext } from './feature.ts'

export function healthFeature(ctx: FeatureContext, deps: { health: HealthService; scheduler: Scheduler }) {
  const { storage, preauth, config } = ctx
  const { health, scheduler } = deps
  return defineFeature({
    name: 'health',
    routes: healthRoutes(health),
    probes: {
      database: () => storage.health(),
      jobs: () => ({ status: scheduler.hasFailures() ? 'degraded' : 'ok', ...scheduler.report() }),
      preauth: () => ({ status: 'ok', held_bytes: preauth.heldBytes, limit_bytes: config.preauth.memoryBytes }),
    },
    readiness: { database: () => storage.ready() },
    api: { health },
  })
}
