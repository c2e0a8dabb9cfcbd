/**
 * How a route says who may call it: every route declares `auth` in its options, and the pipeline
 * (pipeline.ts) runs the matching steps for it — nothing is decided by a list of paths.
 *
 * - `'public'`: no signature (docs/protocol.md §1.1): health, the API reference, the console, /metrics.
 * - `'agent'`: a signed request; the caller is typed in the handler's context as `caller`.
 * - `'operator'`: a signed request from one of RELAY_ADMIN_KEYS; anyone else 403 `forbidden`.
 * - `'upload'`: a signed blob upload. The body is streamed, not read: the headers and timestamp are
 *   checked before a byte is read, and the handler's `upload.verify(hash)` finishes the signature
 *   check once the streamed hash is known (docs/protocol.md §6).
 *
 * Options beside the mode: `ownLimit` for routes whose answers report a rate limit of their own (sends
 * and polls; the general per-agent limit does not count them), `head` for the one route that answers
 * HEAD (blob downloads, docs/protocol.md §6; elsewhere a HEAD is a wrong method, 404).
 */
import { Elysia } from 'elysia'
import type { AgentRecord } from '../services/models/records.ts'
import type { AuthDeclaration, AuthMode, Inbound, PendingUpload } from './inbound.ts'

export type { AuthDeclaration, AuthMode, PendingUpload } from './inbound.ts'

/** Marks the parse step of the auth macro, so the app can check that every route declared its auth. */
export const DECLARED_AUTH = Symbol('declared-auth')

const declared = <F extends (...args: never[]) => unknown>(fn: F): F => Object.assign(fn, { [DECLARED_AUTH]: true })

export const routeAuth = new Elysia({ name: 'route-auth' })
  // replaced for every request by the pipeline's first step (pipeline.ts)
  .decorate('inbound', undefined as unknown as Inbound)
  .macro({
    auth(declaration: AuthMode | AuthDeclaration) {
      const route: AuthDeclaration = typeof declaration === 'string' ? { mode: declaration } : declaration
      return {
        parse: declared(({ inbound, request }: { inbound: Inbound; request: Request }) => inbound.pipeline.readBody(inbound, request, route)),
        resolve: async ({ inbound, request, params, set }: { inbound: Inbound; request: Request; params: unknown; set: { headers: Record<string, unknown> } }) =>
          inbound.pipeline.authorize(inbound, request, route, params as Record<string, unknown> | undefined, set.headers as Record<string, string>) as Promise<{
            /** The signed caller (`agent`, `operator`); undefined on `public` and `upload` routes. */
            caller: AgentRecord
            /** On `upload` routes only. */
            upload: PendingUpload
          }>,
        afterHandle: ({ inbound }: { inbound: Inbound }) => inbound.pipeline.settle(inbound),
      }
    },
  })
