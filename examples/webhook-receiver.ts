/**
 * A webhook receiver: registers its own URL with the relay under a fresh secret, then accepts only
 * deliveries whose HMAC signature and timestamp check out (`verifyWebhook`), prints each message once
 * (the relay may deliver one twice after a crash) and answers 204 so the relay marks it delivered.
 *
 *   bun examples/webhook-receiver.ts
 *   env: RELAY_URL (default http://127.0.0.1:8080), RELAY_KEY_FILE (default ./relay.key),
 *        PORT (default 9000), PUBLIC_URL (how the relay reaches this server; default
 *        http://127.0.0.1:PORT/hook, which a relay accepts only with RELAY_WEBHOOK_ALLOW_PRIVATE_TARGETS=true)
 */
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { RelayClient, WebhookVerificationError, decodeKeyFile, verifyWebhook } from 'm2m-relay'

const baseUrl = process.env.RELAY_URL ?? 'http://127.0.0.1:8080'
const client = new RelayClient({ baseUrl, keys: decodeKeyFile(readFileSync(process.env.RELAY_KEY_FILE ?? 'relay.key', 'utf8')) })
const port = Number(process.env.PORT ?? 9000)
const publicUrl = process.env.PUBLIC_URL ?? `http://127.0.0.1:${port}/hook`
const secret = randomBytes(32).toString('base64url') // the relay never shows it again; keep it if you restart
const seen = new Set<string>() // keep this in a database in production

const server = Bun.serve({
  hostname: '127.0.0.1',
  port,
  async fetch(req) {
    if (req.method !== 'POST' || new URL(req.url).pathname !== '/hook') return new Response('not found', { status: 404 })
    const rawBody = new Uint8Array(await req.arrayBuffer()) // verify the exact bytes received
    try {
      const { message } = await verifyWebhook({ rawBody, headers: req.headers, secret })
      if (!seen.has(message.message_id)) {
        seen.add(message.message_id)
        console.log(`from ${message.sender_key}: ${JSON.stringify(message.body)}`)
      }
      return new Response(null, { status: 204 })
    } catch (err) {
      if (!(err instanceof WebhookVerificationError)) throw err
      console.error(`refused a delivery: ${err.message}`)
      return new Response(err.reason, { status: 401 })
    }
  },
})

const shutdown = () => void server.stop().then(() => process.exit(0))
process.on('SIGINT', shutdown)
process.on('SIGTERM', shutdown)

await client.setWebhook(publicUrl, secret)
console.log(`webhook receiver for ${client.publicKey} at ${publicUrl}`)
