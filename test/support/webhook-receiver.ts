/**
 * A real HTTP receiver on 127.0.0.1 for webhook tests: records every request as received (raw body and
 * headers) and answers as told — a status, a redirect, or nothing until released (timeouts).
 */
import type { Server } from 'bun'

export interface Received {
  path: string
  headers: Record<string, string>
  raw: string
  json: any
}

export type Answer = number | { redirect: string } | 'hang'

export class WebhookReceiver {
  readonly received: Received[] = []
  private answers: Answer[] = []
  private fallback: Answer = 204
  private readonly hung: (() => void)[] = []
  private constructor(readonly server: Server<undefined>) {}

  static start(): WebhookReceiver {
    let self: WebhookReceiver | undefined
    const server = Bun.serve({
      hostname: '127.0.0.1',
      port: 0,
      fetch: async (req) => {
        const raw = await req.text()
        const url = new URL(req.url)
        const r = self as WebhookReceiver
        r.received.push({ path: url.pathname, headers: Object.fromEntries(req.headers), raw, json: safeJson(raw) })
        const answer = r.answers.shift() ?? r.fallback
        if (answer === 'hang') {
          await new Promise<void>((resolve) => r.hung.push(resolve))
          return new Response(null, { status: 204 })
        }
        if (typeof answer === 'object') return new Response(null, { status: 302, headers: { location: answer.redirect } })
        return new Response(answer === 204 ? null : 'answer', { status: answer })
      },
    })
    self = new WebhookReceiver(server)
    return self
  }

  get url(): string {
    return `http://127.0.0.1:${this.server.port}/hook`
  }

  /** Answers for the next requests, in order; then `fallback` (204 unless set). */
  answer(...answers: Answer[]): this {
    this.answers.push(...answers)
    return this
  }

  setFallback(answer: Answer): this {
    this.fallback = answer
    return this
  }

  /** Lets every hanging request answer 204. */
  release(): void {
    for (const r of this.hung.splice(0)) r()
  }

  stop(): void {
    this.release()
    this.server.stop(true)
  }
}

function safeJson(raw: string): any {
  try {
    return JSON.parse(raw)
  } catch {
    return undefined
  }
}
