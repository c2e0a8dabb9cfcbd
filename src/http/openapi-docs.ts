/**
 * Helpers for OpenAPI `detail` objects of routes whose inputs a service validates (so Elysia gets no
 * schema to validate with, only documentation). The OpenAPI typings are stricter than TypeBox's JSON
 * Schema output, hence the one cast in `doc`.
 */
import { ErrorEnvelope } from '../services/models/agent.ts'

type Schema = unknown

/** A route's OpenAPI operation object. */
export const doc = (detail: Record<string, unknown>): never => detail as never

export const jsonResponse = (schema: Schema, description: string, headers?: Record<string, unknown>) => ({
  description,
  content: { 'application/json': { schema } },
  ...(headers ? { headers } : {}),
})

export const jsonBody = (schema: Schema) => ({ required: true, content: { 'application/json': { schema } } })

/** Error envelope responses (SPEC §11) for the given statuses. */
export const errorResponses = (...statuses: number[]) =>
  Object.fromEntries(statuses.map((s) => [String(s), jsonResponse(ErrorEnvelope, 'Error envelope (SPEC §11)')]))

export const pathParam = (name: string, schema: Schema = { type: 'string' }) => ({ name, in: 'path', required: true, schema })

export const queryParams = (params: Record<string, { description: string; schema: Schema }>) =>
  Object.entries(params).map(([name, p]) => ({ name, in: 'query', required: false, ...p }))

/** SPEC §7 headers of rate-limited endpoints. */
export const rateLimitHeaders = {
  'X-RateLimit-Limit': { schema: { type: 'integer' }, description: 'requests allowed per sliding minute' },
  'X-RateLimit-Remaining': { schema: { type: 'integer' }, description: 'requests left in the window' },
  'X-RateLimit-Reset': { schema: { type: 'integer' }, description: 'unix seconds when the window next frees a request' },
}
