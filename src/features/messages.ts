/**
 * The messaging feature: messages (docs/protocol.md §4), ACL and inbox policies (§5), rate limits (§7) and the
 * expiry sweep (§4.6). Builds its repositories, services, routes and job from the feature context.
 */
import { Elysia } from 'elysia'
import { aclRoutes } from '../http/routes/acl.ts'
import { messageRoutes } from '../http/routes/messages.ts'
import { defineFeature, type FeatureContext } from './feature.ts'
import { AclService } from '../services/acl.ts'
import { MessagesService } from '../services/messages.ts'
import { MessageSweeper } from '../services/messages-sweep.ts'
import { RateLimiter } from '../services/rate-limiter.ts'

export const EXPIRE_MESSAGES_JOB = 'expire-messages'

export function messagesFeature(ctx: FeatureContext) {
  const { config, clock, storage } = ctx
  const rateLimiter = new RateLimiter(
    { send: config.rateLimits.sendPerMin, poll: config.rateLimits.pollPerMin, request: config.rateLimits.requestsPerMin },
    storage.rates,
  )
  const acl = new AclService(storage, clock)
  const messages = new MessagesService({
    storage,
    acl,
    rateLimiter,
    clock,
    signals: ctx.signals,
    expiredRetentionMs: config.messages.expiredRetentionMs,
    requireEncryption: config.messages.requireEncryption,
  })
  const sweeper = new MessageSweeper(storage, config.messages.expiredRetentionMs)
  return defineFeature({
    name: 'messages',
    routes: new Elysia({ name: 'feature-messages' }).use(messageRoutes(messages)).use(aclRoutes(acl)),
    jobs: [
      {
        name: EXPIRE_MESSAGES_JOB,
        intervalMs: config.sweepIntervalMs,
        exclusive: true,
        run: async (now) => ({ ...(await sweeper.runOnce(now)), rate_limit_agents_dropped: await rateLimiter.prune(now) }),
      },
    ],
    on: {
      // an agent deleted: its ACL entries and the messages addressed to it go (docs/protocol.md §2.2)
      agentDeleting: async (tx, publicKey) => {
        await tx.acl.removeOwnedBy(publicKey)
        await tx.messages.removeAddressedTo(publicKey)
      },
    },
    api: { messages, acl, rateLimiter, sweeper },
  })
}

export type MessagesApi = ReturnType<typeof messagesFeature>['api']
