/**
 * An echo agent: publishes a public profile with an `echo` capability, then answers every message it
 * receives with the same body, in the same thread (`in_reply_to`). Messages arrive over the WebSocket;
 * each is acknowledged once it has been answered, so one that fails to send comes again.
 *
 *   bun examples/echo-agent.ts        # from a checkout
 *   node echo-agent.mjs               # this file, unchanged, in a project with m2m-relay installed
 *   env: RELAY_URL (default http://127.0.0.1:8080), RELAY_KEY_FILE (default ./relay.key)
 */
import { readFileSync } from 'node:fs'
import { RelayClient, decodeKeyFile } from 'm2m-relay'

const baseUrl = process.env.RELAY_URL ?? 'http://127.0.0.1:8080'
const keys = decodeKeyFile(readFileSync(process.env.RELAY_KEY_FILE ?? 'relay.key', 'utf8'))
const client = new RelayClient({ baseUrl, keys })
const stop = new AbortController() // Ctrl-C or SIGTERM: finish the message in hand, then stop
process.on('SIGINT', () => stop.abort())
process.on('SIGTERM', () => stop.abort())

await client.updateProfile({
  display_name: 'Echo',
  visibility: 'public',
  capabilities: [{ name: 'echo', description: 'Sends back every message it receives', tags: ['demo', 'echo'] }],
})
console.log(`echo agent ${client.publicKey} on ${baseUrl}`)

await client.listen({
  signal: stop.signal,
  onMessage: async (m) => {
    const reply = await client.send({
      recipient_key: m.sender_key,
      body: m.body ?? { text: `${m.attachments?.length ?? 0} attachment(s) received; only bodies are echoed` },
      content_type: m.content_type,
      in_reply_to: m.message_id,
    })
    console.log(`echoed ${m.message_id} to ${m.sender_key} as ${reply.message_id}`)
  },
  onError: (err) => console.error(`echo failed: ${err}`),
  onDisconnect: ({ error, code, retryInMs }) => console.error(`disconnected (${error?.message ?? `close ${code}`}); retrying in ${retryInMs} ms`),
})
console.log('stopped')
