/**
 * `relay admin …`: operator commands on the data directory, while the relay runs or not. Every action
 * goes through the AdminService that also answers /v1/admin, over the storage the configuration names.
 */
import { isPublicKey } from '../auth/keys.ts'
import { loadConfig } from '../config/load.ts'
import { systemClock } from '../lib/clock.ts'
import { silentLogger } from '../lib/logger.ts'
import { AdminService, AGENT_PAGE_MAX } from '../services/admin.ts'
import { AdmissionService, admissionOptions } from '../services/admission.ts'
import { AgentsService } from '../services/agents.ts'
import { openStorageAsync } from '../storage/open-storage.ts'
import { prepareDataDir } from '../relay.ts'
import { UsageError } from './args.ts'
import { requireDatabase } from './data-dir.ts'
import { fields, humanBytes, table } from './format.ts'

export const ADMIN_FLAGS = ['reason', 'data-dir', 'config', 'status', 'limit', 'cursor', 'note']
export const ADMIN_BOOLEANS = ['json']

type Action = (args: string[], flags: Record<string, string>) => Promise<void>

const print = (text: string): void => void process.stdout.write(text)
const printJson = (value: unknown): void => print(JSON.stringify(value, null, 2) + '\n')

/**
 * The AdminService over the relay's storage, found the way `serve` finds it (--data-dir,
 * RELAY_DATA_DIR, config). `existing`: the data directory must hold a database already (commands that
 * only read), so a mistyped path is an error rather than a new, empty relay.
 */
async function withAdmin<T>(flags: Record<string, string>, run: (admin: AdminService, dataDir: string) => Promise<T>, opts: { existing?: boolean } = {}): Promise<T> {
  const config = await loadConfig({ flags })
  if (opts.existing && !config.database.url) requireDatabase(config.dataDir)
  const clock = systemClock
  // the storage the relay itself runs on: the SQLite file, or the database RELAY_DATABASE_URL names
  const { storage, signals } = await openStorageAsync(config, prepareDataDir(config.dataDir), silentLogger, clock, { tool: true })
  try {
    // the admin keys are left out: a command acts for the operator, not for a caller to admit
    const admission = new AdmissionService(storage, clock, { ...admissionOptions(config), adminKeys: [] })
    const admin = new AdminService({ storage, clock, agents: new AgentsService(storage, clock, signals), admission })
    return await run(admin, config.dataDir)
  } finally {
    await signals.close()
    await storage.close()
  }
}

const needKey = (action: string, key: string | undefined): string => {
  if (!isPublicKey(key)) throw new UsageError(`${action} needs a public key (43 base64url characters)`)
  return key
}

/** `relay admin suspend KEY [--reason TEXT]` / `relay admin unsuspend KEY` (docs/protocol.md §2.3). */
async function suspension(action: 'suspend' | 'unsuspend', key: string | undefined, flags: Record<string, string>): Promise<void> {
  const publicKey = needKey(action, key)
  await withAdmin(flags, async (admin) => {
    if (action === 'suspend') await admin.suspend(publicKey, flags.reason ?? null)
    else await admin.unsuspend(publicKey)
  })
  print(`${action}ed ${publicKey}\n`)
}

/** `relay admin stats`: agents, messages by status, blobs, webhooks and database size. */
async function stats(_args: string[], flags: Record<string, string>): Promise<void> {
  const { s, dataDir } = await withAdmin(flags, async (admin, dataDir) => ({ s: await admin.stats(), dataDir }), { existing: true })
  if (flags.json === 'true') return printJson({ data_dir: dataDir, ...s })
  print(
    fields([
      ['data dir', dataDir],
      ['agents', `${s.agents.active} active, ${s.agents.suspended} suspended (${s.agents.total} total)`],
      ['messages', `${s.messages.sent} sent, ${s.messages.delivered} delivered, ${s.messages.expired} expired (${s.messages.total} total)`],
      ['blobs', `${s.blobs.records} records, ${humanBytes(s.blobs.bytes)}; ${s.blobs.stored_files} files on disk, ${humanBytes(s.blobs.stored_bytes)}`],
      ['webhooks', `${s.webhooks.enabled} enabled, ${s.webhooks.disabled} disabled; ${s.webhooks.pending_deliveries} deliveries pending`],
      ['database', `${humanBytes(s.database.size_bytes)} (+ ${humanBytes(s.database.wal_bytes)} write-ahead log)`],
    ]),
  )
}

/** `relay admin agents [--status S] [--limit N] [--cursor C]`: every agent with its status, paged. */
async function agents(_args: string[], flags: Record<string, string>): Promise<void> {
  const status = flags.status
  if (status !== undefined && status !== 'active' && status !== 'suspended') throw new UsageError('--status must be active or suspended')
  const limit = flags.limit === undefined ? 100 : Number(flags.limit)
  if (!Number.isInteger(limit) || limit < 1 || limit > AGENT_PAGE_MAX) throw new UsageError(`--limit must be an integer 1–${AGENT_PAGE_MAX}`)
  const page = await withAdmin(
    flags,
    (admin) =>
      admin.listAgents({ status, limit, cursor: flags.cursor }).catch((err) => {
        throw flags.cursor && (err as { code?: string }).code === 'bad_request' ? new UsageError('--cursor is not a cursor printed by relay admin agents') : err
      }),
    { existing: true },
  )
  if (flags.json === 'true') return printJson(page)
  print(
    table(
      ['public key', 'status', 'name', 'visibility', 'inbox', 'caps', 'last active', 'suspension reason'],
      page.agents.map((a) => [a.public_key, a.status, a.display_name, a.visibility, a.inbox_policy, a.capabilities, a.last_active_at, a.status === 'suspended' ? (a.suspended_reason ?? '(none given)') : null]),
    ),
  )
  if (page.next_cursor) print(`more: relay admin agents --cursor ${page.next_cursor}${status ? ` --status ${status}` : ''} --limit ${limit}\n`)
}

/**
 * `relay admin allow KEY [--note TEXT]`, `relay admin revoke KEY`, `relay admin allowed [--json]`:
 * the allowlist of RELAY_ADMISSION=allowlist. A running relay applies changes within a second.
 */
async function allowlist(action: 'allow' | 'revoke', key: string | undefined, flags: Record<string, string>): Promise<void> {
  const publicKey = needKey(action, key)
  await withAdmin(flags, async (admin) => {
    if (action === 'allow') {
      const { added } = await admin.allow(publicKey, flags.note ?? null)
      print(added ? `allowed ${publicKey}\n` : `${publicKey} was already allowed\n`)
    } else {
      await admin.revoke(publicKey)
      print(`revoked ${publicKey}\n`)
    }
  })
}

async function allowed(_args: string[], flags: Record<string, string>): Promise<void> {
  const entries = await withAdmin(flags, (admin) => admin.allowed())
  if (flags.json === 'true') return printJson({ allowed: entries })
  if (entries.length === 0) return print('no key is allowed yet (relay admin allow KEY)\n')
  print(table(['public key', 'allowed since', 'note'], entries.map((e) => [e.public_key, e.created_at, e.note ?? ''])))
}

/** `relay admin webhooks [--limit N] [--json]`: webhook deliveries waiting, the soonest due first. */
async function webhooks(_args: string[], flags: Record<string, string>): Promise<void> {
  const limit = flags.limit === undefined ? 100 : Number(flags.limit)
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new UsageError('--limit must be an integer 1–1000')
  const queue = await withAdmin(flags, (admin) => admin.webhookQueue(limit), { existing: true })
  if (flags.json === 'true') return printJson(queue)
  if (queue.deliveries.length === 0) return print('no webhook delivery is waiting\n')
  print(
    table(
      ['agent', 'message', 'state', 'attempts', 'next attempt', 'last error'],
      queue.deliveries.map((d) => [d.public_key, d.message_id, d.state, d.attempts, d.next_attempt_at, d.last_error ?? '']),
    ),
  )
  if (queue.pending_deliveries > queue.deliveries.length) print(`${queue.pending_deliveries} deliveries waiting in all\n`)
}

const ACTIONS: Record<string, Action> = {
  allow: ([key], flags) => allowlist('allow', key, flags),
  revoke: ([key], flags) => allowlist('revoke', key, flags),
  allowed,
  suspend: ([key], flags) => suspension('suspend', key, flags),
  unsuspend: ([key], flags) => suspension('unsuspend', key, flags),
  stats,
  agents,
  webhooks,
}

/** `relay admin ACTION …`: operator commands on the data directory, while the relay runs or not. */
export async function admin(positionals: string[], flags: Record<string, string>): Promise<void> {
  const [action, ...rest] = positionals
  const run = ACTIONS[action ?? '']
  if (!run) throw new UsageError(`unknown admin command "${action ?? ''}" (suspend, unsuspend, stats, agents, allow, revoke, allowed, webhooks)`)
  await run(rest, flags)
}
