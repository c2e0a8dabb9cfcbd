/** Discovery and the capability catalog (SPEC §3): repository, service and routes. */
import type { FeatureContext } from '../relay.ts'
import { discoveryRoutes } from '../http/routes/discovery.ts'
import { DiscoveryService } from '../services/discovery.ts'
import { DiscoveryRepo } from '../storage/discovery-repo.ts'

export function installDiscovery(ctx: FeatureContext) {
  const repo = new DiscoveryRepo(ctx.db.$client)
  const discovery = new DiscoveryService(repo, ctx.logger)
  return { routes: discoveryRoutes(discovery), discovery, repo }
}
