/**
 * Checks every authenticated route shares, run once the caller is known and before any handler:
 *
 * - Path parameters are percent-decoded UTF-8. The router hands over null for a segment that does not
 *   decode (`%ff%fe`, a surrogate `%ED%A0%80`, an overlong `%C0%AF`); that is a 400 naming the parameter,
 *   never a handler running with null.
 * - `{publicKey}` may be `me`, meaning the caller's own key (`/v1/agents/me`, `/v1/agents/me/acl`, …);
 *   any other value must be a public key (400).
 * - The general rate limit: every signed request other than a send or a poll (which have limits of
 *   their own) counts against `rateLimits.requestsPerMin` per agent, in memory, and its answer carries
 *   X-RateLimit-Limit/Remaining/Reset for that window (429 with Retry-After beyond it).
 */
import { Elysia } from 'elysia'
import { PUBLIC_KEY_PATTERN } from '../auth/keys.ts'
import { badRequest, type FieldErrors } from '../errors.ts'
import type { Clock } from '../lib/clock.ts'
import type { RateLimiter } from '../services/rate-limiter.ts'
import { withRateHeaders } from '../services/rate-limiter.ts'
import { stateOf } from './request-state.ts'

export const ME = 'me'

/** Routes whose answers report a limit of their own: sends and polls. */
const hasOwnLimit = (method: string, route: string) => route === '/v1/messages' && (method === 'POST' || method === 'GET')

export interface RequestGuardDeps {
  limiter: RateLimiter
  clock: Clock
}

function pathProblems(params: Record<string, unknown>, callerKey: string | undefined): FieldErrors {
  const fields: FieldErrors = {}
  for (const name in params) {
    if (typeof params[name] !== 'string') fields[name] = 'is not valid percent-encoded UTF-8'
  }
  if (typeof params.publicKey === 'string') {
    if (params.publicKey === ME && callerKey) params.publicKey = callerKey
    else if (!PUBLIC_KEY_PATTERN.test(params.publicKey)) fields.publicKey = `must be a public key (43 base64url characters) or "${ME}"`
  }
  return fields
}

export function requestGuards({ limiter, clock }: RequestGuardDeps) {
  return new Elysia({ name: 'request-guards' }).onBeforeHandle({ as: 'global' }, async ({ request, params, route, set }) => {
    const state = stateOf(request)
    const agent = state?.agent
    const own = hasOwnLimit(request.method, route)
    const fields = params ? pathProblems(params as Record<string, unknown>, agent?.publicKey) : {}
    if (Object.keys(fields).length) {
      const rate = agent && !own ? await limiter.peek('request', agent.publicKey, clock.now()) : null
      throw withRateHeaders(badRequest('Invalid path parameters', fields), rate)
    }
    if (!state || own) return
    if (agent) {
      Object.assign(set.headers, (await limiter.enforce('request', agent.publicKey, clock.now())).headers)
      return
    }
    // a blob upload learns its caller once the streamed body is verified: it counts then (its
    // answer, success or refusal, carries the headers), but is never refused for it afterwards
    if (state.pendingAuth) {
      state.onAuthenticated = async (key) => {
        Object.assign(set.headers, (await limiter.check('request', key, clock.now())).headers)
      }
    }
  })
}
