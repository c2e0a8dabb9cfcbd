/** Discovery and the capability catalog (docs/protocol.md §3): service and routes over the storage's discovery port. */
import { discoveryRoutes } from '../http/routes/discovery.ts'
import { DiscoveryService } from '../services/discovery.ts'
import { defineFeature, type FeatureContext } from './feature.ts'

export function discoveryFeature(ctx: FeatureContext) {
  const discovery = new DiscoveryService(ctx.storage.discovery, ctx.logger)
  return defineFeature({ name: 'discovery', routes: discoveryRoutes(discovery), api: { discovery } })
}
