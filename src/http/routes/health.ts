/** Health endpoints (SPEC §10); no authentication. */
import { Elysia } from 'elysia'
import type { HealthService } from '../../services/health.ts'

export function healthRoutes(health: HealthService) {
  return new Elysia({ name: 'routes-health' })
    .get('/v1/health', () => ({ status: 'ok' }), { detail: { tags: ['health'], summary: 'Liveness' } })
    .get(
      '/v1/health/ready',
      ({ set }) => {
        const { ok, problems } = health.ready()
        if (ok) return { status: 'ok' }
        set.status = 503
        return { status: 'unavailable', problems }
      },
      { detail: { tags: ['health'], summary: 'Readiness: database and blob directory writable' } },
    )
    .get('/v1/health/details', () => health.details(), {
      detail: { tags: ['health'], summary: 'Version, uptime and the state of each component' },
    })
}
