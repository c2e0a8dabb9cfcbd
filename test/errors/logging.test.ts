/**
 * What the operator sees in the log: the error code on the request line of every non-2xx answer, and a
 * warn line for every failed webhook attempt with its delivery id and reason.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { createLogger } from '../../src/lib/logger.ts'
import { BASE_URL, startTestRelay, type TestRelay } from '../support/harness.ts'
import { WebhookReceiver } from '../support/webhook-receiver.ts'
import { until } from '../support/ws.ts'
import { agent, msg } from '../messages/helpers.ts'

let t: TestRelay
const lines: any[] = []
beforeAll(async () => {
  t = await startTestRelay(
    { logLevel: 'info', rateLimits: { sendPerMin: 0, pollPerMin: 0, requestsPerMin: 0 }, webhooks: { allowPrivateTargets: true, retryDelaysMs: [50], timeoutMs: 500 } },
    { logger: createLogger('info', (l) => lines.push(JSON.parse(l))) },
  )
})
afterAll(() => t.close())

const requestLine = (requestId: string | null) => lines.find((l) => l.msg === 'request' && l.request_id === requestId)

describe('request lines', () => {
  test('carry the error code of every non-2xx answer, and none for a success', async () => {
    const a = await agent(t)
    const cases: [Promise<Response>, number, string | undefined][] = [
      [a.transport.send('GET', `/v1/agents/${a.publicKey}`), 200, undefined],
      [a.transport.send('PATCH', '/v1/agents/me', '{"visibility":1}'), 400, 'bad_request'],
      [a.transport.send('GET', '/v1/messages/msg_1_000000000000'), 404, 'message_not_found'],
      [a.transport.send('POST', '/v1/messages', '[' + '['.repeat(200)), 400, 'bad_request'],
      [t.handle(new Request(BASE_URL + '/v1/discover?q=x')), 401, 'unauthorized'],
      [t.handle(new Request(BASE_URL + '/v1/nothing')), 404, 'not_found'],
    ]
    for (const [pending, status, code] of cases) {
      const res = await pending
      expect(res.status).toBe(status)
      // the line is written once the answer has gone out
      const line = await until(() => requestLine(res.headers.get('x-request-id')), 2000, 'the request line')
      expect([line.status, line.code]).toEqual([status, code])
    }
  })
})

describe('webhook attempts', () => {
  test('a failed attempt is logged at warn with the delivery id, outcome, status and reason', async () => {
    const rx = WebhookReceiver.start()
    try {
      const [alice, bob] = [await agent(t), await agent(t)]
      await bob.setWebhook(rx.url, randomBytes(32).toString('base64url'))
      rx.answer(500)
      await alice.send(msg(bob))
      const dispatcher = t.relay.features.webhooks.dispatcher
      await dispatcher.whenIdle()
      const warn = lines.find((l) => l.msg === 'webhook attempt failed')
      expect(warn).toMatchObject({ level: 'warn', outcome: 'http_error', status: 500, error: 'HTTP 500' })
      expect(warn.delivery_id).toMatch(/^dlv_/)
      expect(warn.delivery_id).toBe(rx.received[0].headers['x-m2m-delivery-id'])
      // the retry succeeds: no second warn line
      t.clock.advance(100)
      await dispatcher.runOnce(t.clock.now())
      expect(lines.filter((l) => l.msg === 'webhook attempt failed')).toHaveLength(1)
    } finally {
      rx.stop()
    }
  })
  test('a refused target names the setting that allows it', async () => {
    const strict = await startTestRelay(
      { webhooks: { allowPrivateTargets: false, retryDelaysMs: [50] } },
      { logger: createLogger('warn', (l) => lines.push(JSON.parse(l))) },
    )
    try {
      const [alice, bob] = [strict.client(), strict.client()]
      await bob.setWebhook('https://hook.example/in', randomBytes(32).toString('base64url'))
      strict.relay.features.webhooks.dispatcher.setResolver(async () => [{ address: '10.0.0.7', family: 4 }])
      await alice.send(msg(bob))
      await strict.relay.features.webhooks.dispatcher.whenIdle()
      const warn = lines.find((l) => l.msg === 'webhook attempt failed' && l.outcome === 'refused')
      expect(warn.error).toContain('10.0.0.7, a private address')
      expect(warn.error).toContain('RELAY_WEBHOOK_ALLOW_PRIVATE_TARGETS=true')
    } finally {
      await strict.close()
    }
  })
})
