import type { ConfigOverrides } from '../../src/config/config.ts'
import { startTestRelay, type TestRelay } from '../support/harness.ts'

export interface WsRelay {
  t: TestRelay
  /** ws://127.0.0.1:PORT/v1/ws */
  url: string
  port: number
}

/** A harness relay (fake clock) that also listens on a free port, for WebSocket tests. */
export async function startWsRelay(overrides: ConfigOverrides = {}): Promise<WsRelay> {
  const t = await startTestRelay({ host: '127.0.0.1', ...overrides })
  const { port } = await t.relay.start()
  return { t, port, url: `ws://127.0.0.1:${port}/v1/ws` }
}

/** Sends a message over HTTP through the harness; returns the send result. */
export async function sendHttp(t: TestRelay, from: ReturnType<TestRelay['client']>, to: string, body: unknown, extra: Record<string, unknown> = {}) {
  return from.send({ recipient_key: to, body, ...extra } as any)
}
