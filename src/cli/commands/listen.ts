import type { ReceivedMessageJson } from '../../client/index.ts'
import { UsageError, type CommandSpec } from './command.ts'
import { errorLine } from '../format.ts'

export const listen: CommandSpec = {
  name: 'listen',
  maxArgs: 0,
  summary: 'receive your messages as they arrive, one JSON line each, and ack them',
  description:
    'Keeps a WebSocket open (reconnecting with backoff) and prints every message waiting for you, oldest first, then each new one. ' +
    'A message is acked (marked delivered) once printed, unless --no-ack. Stops on Ctrl-C or SIGTERM, or after --count messages. ' +
    'End-to-end encrypted messages are printed decrypted with an "encryption" field (with the reason when one does not open).',
  flags: [
    { name: 'count', value: 'N', help: 'exit after N messages' },
    { name: 'no-ack', help: 'print without acking: messages stay sent and come again on the next connection' },
  ],
  async run(ctx) {
    let count: number | undefined
    if (ctx.flags.count !== undefined) {
      count = Number(ctx.flags.count)
      if (!Number.isInteger(count) || count < 1) throw new UsageError('--count must be a positive integer')
    }
    const client = ctx.client()
    const stop = new AbortController()
    const onSignal = () => stop.abort()
    process.once('SIGINT', onSignal)
    process.once('SIGTERM', onSignal)
    const ack = ctx.flags['no-ack'] !== 'true'
    let received = 0
    try {
      await client.listen({
        signal: stop.signal,
        autoAck: false,
        onConnect: () => ctx.out.note(`listening as ${client.publicKey} on ${ctx.relayUrl}\n`),
        onDisconnect: (info) => {
          const why = info.error ? info.error.message : `connection closed (${info.code}${info.reason ? ` ${info.reason}` : ''})`
          ctx.out.note(`${why}; reconnecting in ${(info.retryInMs / 1000).toFixed(1)} s\n`)
        },
        onError: (err) => ctx.out.note(errorLine((err as Error)?.message ?? String(err))),
        onMessage: (message: ReceivedMessageJson, socket) => {
          if (count !== undefined && received >= count) return // past the count: neither printed nor acked
          ctx.out.text(JSON.stringify(message) + '\n')
          if (ack) socket.ack(message.message_id)
          if (count !== undefined && ++received >= count) stop.abort()
        },
      })
    } finally {
      process.off('SIGINT', onSignal)
      process.off('SIGTERM', onSignal)
    }
  },
}
