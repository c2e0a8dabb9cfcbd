/**
 * The messaging feature: messages (SPEC §4), ACL and inbox policies (§5), rate limits (§7) and the
 * expiry sweep (§4.6). Builds its repositories, services, routes and job from the feature context.
 */
import { Elysia } from 'elysia'
import { aclRoutes } from '../http/routes/acl.ts'
import { messageRoutes } from '../http/routes/messages.ts'
import type { FeatureContext } from '../relay.ts'
import { AclService } from '../services/acl.ts'
import { MessagesService } from '../services/messages.ts'
import { MessageSweeper } from '../services/messages-sweep.ts'
import { RateLimiter } from '../services/rate-limiter.ts'
import { AclRepo } from '../storage/acl-repo.ts'
import { MessagesRepo } from '../storage/messages-repo.ts'

export const EXPIRE_MESSAGES_JOB = 'expire-messages'

export function installMessages(ctx: FeatureContext) {
  const { config, clock, db } = ctx
  const rateLimiter = new RateLimiter({ send: config.rateLimits.sendPerMin, poll: config.rateLimits.pollPerMin })
  const acl = new AclService(new AclRepo(db), clock)
  const repo = new MessagesRepo(db)
  const messages = new MessagesService({
    repo,
    acl,
    rateLimiter,
    clock,
    events: ctx.events,
    writes: ctx.writes,
    expiredRetentionMs: config.messages.expiredRetentionMs,
  })
  const sweeper = new MessageSweeper(repo, config.messages.expiredRetentionMs)
  ctx.scheduler.add(EXPIRE_MESSAGES_JOB, config.sweepIntervalMs, async (now) => {
    const result = await sweeper.runOnce(now)
    return { ...result, rate_limit_agents_dropped: rateLimiter.prune(now) }
  })

  ctx.onStop.push(() => messages.flushPending())

  const routes = new Elysia({ name: 'feature-messages' }).use(messageRoutes(messages)).use(aclRoutes(acl))
  return { routes, messages, acl, rateLimiter, sweeper }
}

export type MessagesFeature = ReturnType<typeof installMessages>
