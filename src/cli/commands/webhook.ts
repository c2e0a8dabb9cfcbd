import { randomBytes } from 'node:crypto'
import type { WebhookConfigJson } from '../../client/index.ts'
import { fields } from '../format.ts'
import { UsageError, type CommandContext, type CommandSpec } from './command.ts'
import { inlineOrFile } from './profile.ts'

const printConfig = (ctx: CommandContext, w: WebhookConfigJson) =>
  ctx.out.text(
    fields([
      ['url', w.url],
      ['enabled', String(w.enabled)],
      ['consecutive failures', String(w.consecutive_failures)],
      ['created', w.created_at],
      ['updated', w.updated_at],
    ]),
  )

export const webhookSet: CommandSpec = {
  name: 'webhook set',
  maxArgs: 0,
  summary: 'register or replace your webhook (enabled, failure count reset)',
  description:
    'The relay POSTs each message for you to URL, signed with the secret (X-M2M-Webhook-Signature: hex HMAC-SHA256 of the body). ' +
    'Without --secret a random one is generated and printed once: the relay never shows it again.',
  flags: [
    { name: 'url', value: 'URL', help: 'http or https URL that receives the deliveries' },
    { name: 'secret', value: 'SECRET', help: 'unpadded base64url of 32 bytes, or @FILE, or @- for standard input (default: generate one)' },
  ],
  async run(ctx) {
    const url = ctx.flags.url
    if (!url) throw new UsageError('--url is required')
    const generated = ctx.flags.secret === undefined
    const secret = generated ? randomBytes(32).toString('base64url') : (await inlineOrFile(ctx.flags.secret)).trim()
    const config = await ctx.client().setWebhook(url, secret)
    if (ctx.json) return ctx.out.json(generated ? { ...config, secret } : config)
    printConfig(ctx, config)
    if (generated) {
      ctx.out.text(`secret                ${secret}\n`)
      ctx.out.note('keep this secret for your receiver: the relay never shows it again\n')
    }
  },
}

export const webhookGet: CommandSpec = {
  name: 'webhook get',
  maxArgs: 0,
  summary: 'show your webhook (URL, enabled, consecutive failures)',
  async run(ctx) {
    const config = await ctx.client().getWebhook()
    if (ctx.json) return ctx.out.json(config)
    printConfig(ctx, config)
  },
}

export const webhookDelete: CommandSpec = {
  name: 'webhook delete',
  maxArgs: 0,
  summary: 'remove your webhook; its pending deliveries are cancelled',
  async run(ctx) {
    await ctx.client().deleteWebhook()
    if (ctx.json) return ctx.out.json({ deleted: true })
    ctx.out.text('deleted\n')
  },
}

export const webhook = [webhookSet, webhookGet, webhookDelete]
