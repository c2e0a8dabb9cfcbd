/**
 * Every route declares who may call it; a route that does not is refused when the relay is built,
 * so nothing is signed or public by default.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { Elysia } from 'elysia'
import { assertEveryRouteDeclaresAuth } from '../../src/http/app.ts'
import { routeAuth } from '../../src/http/route-auth.ts'
import { BASE_URL, expectError, startTestRelay, type TestRelay } from '../support/harness.ts'

describe('declared auth', () => {
  let t: TestRelay
  beforeAll(async () => {
    t = await startTestRelay()
  })
  afterAll(() => t.close())

  test('a route without `auth` is refused at build time; one with it passes', () => {
    const declared = new Elysia().use(routeAuth).get('/a', () => 'a', { auth: 'public' })
    expect(() => assertEveryRouteDeclaresAuth(declared)).not.toThrow()
    const bare = new Elysia().use(routeAuth).get('/a', () => 'a', { auth: 'public' }).get('/b', () => 'b')
    expect(() => assertEveryRouteDeclaresAuth(bare)).toThrow('GET /b does not declare its auth')
  })

  test('every route of a relay declares it (the relay was built) and the signed ones refuse unsigned requests', async () => {
    expect(t.relay.app.routes.length).toBeGreaterThan(30)
    await expectError(await t.handle(new Request(BASE_URL + '/v1/messages')), 401, 'unauthorized')
    expect((await t.handle(new Request(BASE_URL + '/v1/health'))).status).toBe(200)
  })

  test('HEAD answers only where a route declares it', async () => {
    // (a HEAD answer carries no body, so only its status is seen)
    expect((await t.handle(new Request(BASE_URL + '/v1/messages', { method: 'HEAD' }))).status).toBe(404)
    expect((await t.handle(new Request(BASE_URL + '/v1/health', { method: 'HEAD' }))).status).toBe(404)
    // the blob download declares HEAD: unsigned, it gets as far as the signature check
    expect((await t.handle(new Request(BASE_URL + '/v1/blobs/b_x', { method: 'HEAD' }))).status).toBe(401)
  })
})
