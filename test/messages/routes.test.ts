/** Routing and documentation of the message and ACL endpoints. */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { BASE_URL, expectError, startTestRelay, type TestRelay } from '../support/harness.ts'
import { agent } from './helpers.ts'

let t: TestRelay
beforeAll(async () => {
  t = await startTestRelay()
})
afterAll(() => t.close())

test('wrong methods and unknown paths under /v1/messages → 404 not_found', async () => {
  const a = await agent(t)
  for (const [method, path] of [
    ['PUT', '/v1/messages'],
    ['DELETE', '/v1/messages'],
    ['DELETE', '/v1/messages/msg_1_000000000000'],
    ['POST', '/v1/messages/msg_1_000000000000/status'],
    ['GET', '/v1/messages/msg_1_000000000000/body'],
    ['POST', '/v1/messages/threads/x'],
  ]) {
    await expectError(await a.transport.send(method, path), 404, 'not_found')
    await expectError(await t.handle(new Request(BASE_URL + path, { method })), 404, 'not_found')
  }
})

test('every message and ACL endpoint needs a signature', async () => {
  const key = (await agent(t)).publicKey
  for (const [method, path] of [
    ['POST', '/v1/messages'],
    ['GET', '/v1/messages'],
    ['GET', '/v1/messages/msg_1_000000000000'],
    ['GET', '/v1/messages/msg_1_000000000000/status'],
    ['GET', '/v1/messages/threads/x'],
    ['GET', `/v1/agents/${key}/acl`],
    ['GET', `/v1/agents/${key}/acl/${key}`],
    ['PUT', `/v1/agents/${key}/acl/${key}`],
    ['DELETE', `/v1/agents/${key}/acl/${key}`],
  ]) {
    await expectError(await t.handle(new Request(BASE_URL + path, { method })), 401, 'unauthorized')
  }
})

test('the OpenAPI document describes the message and ACL endpoints with their schemas', async () => {
  const doc: any = await (await t.handle(new Request(BASE_URL + '/v1/openapi.json'))).json()
  const ops = {
    '/v1/messages': ['get', 'post'],
    '/v1/messages/{messageID}': ['get'],
    '/v1/messages/{messageID}/status': ['get'],
    '/v1/messages/threads/{threadID}': ['get'],
    '/v1/agents/{publicKey}/acl': ['get'],
    '/v1/agents/{publicKey}/acl/{peerKey}': ['get', 'put', 'delete'],
  }
  for (const [path, methods] of Object.entries(ops)) for (const m of methods) expect(doc.paths[path]?.[m]).toBeDefined()
  const post = doc.paths['/v1/messages'].post
  expect(Object.keys(post.requestBody.content['application/json'].schema.properties)).toContain('recipient_key')
  expect(post.responses['201'].headers['X-RateLimit-Limit']).toBeDefined()
  expect(doc.paths['/v1/messages'].get.parameters.map((p: any) => p.name).sort()).toEqual(
    ['cursor', 'in_reply_to', 'limit', 'sender_key', 'status', 'thread_id'].sort(),
  )
})
