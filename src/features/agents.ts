/**
 * Agents (docs/protocol.md §2): profiles and capabilities, and what authentication keeps — the replay log
 * (pruned here) and the cache of known agents (forgotten when an agent goes).
 */
import { agentRoutes } from '../http/routes/agents.ts'
import { defineFeature, type FeatureContext } from './feature.ts'

export const PRUNE_REPLAY_JOB = 'prune-replay-cache'
/** Replay entries removed per prune run, so one run never holds the database for long. */
const REPLAY_PRUNE_BATCH = 5000

export function agentsFeature(ctx: FeatureContext) {
  const { agents, authenticator, storage, config } = ctx
  return defineFeature({
    name: 'agents',
    routes: agentRoutes(agents),
    jobs: [
      {
        name: PRUNE_REPLAY_JOB,
        intervalMs: config.sweepIntervalMs,
        exclusive: true,
        run: async (now) => ({ removed: await storage.replay.prune(now, REPLAY_PRUNE_BATCH) }),
      },
    ],
    on: { agentGone: (publicKey) => authenticator.forget(publicKey) },
    api: { agents },
  })
}
