/** Discovery and the capability catalog (docs/protocol.md §3): service and routes over the storage's discovery port. */
import type { FeatureContext } from '../relay.ts'
import { discoveryRoutes } from '../http/routes/discovery.ts'
import { DiscoveryService } from '../services/discovery.ts'

export function installDiscovery(ctx: FeatureContext) {
  const discovery = new DiscoveryService(ctx.storage.discovery, ctx.logger)
  return { routes: discoveryRoutes(discovery), discovery }
}
