import { isPublicKey } from '../auth/keys.ts'
import { loadConfig } from '../config/load.ts'
import { systemClock } from '../lib/clock.ts'
import { prepareDataDir } from '../relay.ts'
import { AgentsRepo } from '../storage/agents-repo.ts'
import { openDatabase, type Db } from '../storage/db.ts'
import { StatsRepo } from '../storage/stats-repo.ts'
import { UsageError } from './args.ts'
import { openExistingDataDir } from './data-dir.ts'
import { fields, humanBytes, table } from './format.ts'

export const ADMIN_FLAGS = ['reason', 'data-dir', 'config', 'status', 'limit', 'cursor']
export const ADMIN_BOOLEANS = ['json']

/** Opens the relay database the way `serve` finds it (--data-dir, RELAY_DATA_DIR, config). */
export async function openDataDir(flags: Record<string, string>): Promise<Db> {
  const config = await loadConfig({ flags })
  return openDatabase(prepareDataDir(config.dataDir).database)
}

type Action = (args: string[], flags: Record<string, string>) => Promise<void>

const print = (text: string): void => void process.stdout.write(text)
const printJson = (value: unknown): void => print(JSON.stringify(value, null, 2) + '\n')

/** `relay admin suspend KEY [--reason TEXT]` / `relay admin unsuspend KEY` (SPEC §2.3). */
async function suspension(action: 'suspend' | 'unsuspend', key: string | undefined, flags: Record<string, string>): Promise<void> {
  if (!isPublicKey(key)) throw new UsageError(`${action} needs a public key (43 base64url characters)`)
  const db = await openDataDir(flags)
  try {
    const repo = new AgentsRepo(db)
    if (action === 'suspend') {
      repo.suspend(key, flags.reason ?? null, systemClock.now())
      print(`suspended ${key}\n`)
    } else {
      if (!repo.unsuspend(key, systemClock.now())) throw new Error(`no agent ${key}`)
      print(`unsuspended ${key}\n`)
    }
  } finally {
    db.$client.close()
  }
}

/** `relay admin stats`: agents, messages by status, blobs, webhooks and database size. */
async function stats(_args: string[], flags: Record<string, string>): Promise<void> {
  const { client, paths } = await openExistingDataDir(flags)
  try {
    const s = new StatsRepo(client, paths.database).all(systemClock.now())
    if (flags.json === 'true') return printJson({ data_dir: paths.dataDir, ...s })
    print(
      fields([
        ['data dir', paths.dataDir],
        ['agents', `${s.agents.active} active, ${s.agents.suspended} suspended (${s.agents.total} total)`],
        ['messages', `${s.messages.sent} sent, ${s.messages.delivered} delivered, ${s.messages.expired} expired (${s.messages.total} total)`],
        ['blobs', `${s.blobs.records} records, ${humanBytes(s.blobs.bytes)}; ${s.blobs.stored_files} files on disk, ${humanBytes(s.blobs.stored_bytes)}`],
        ['webhooks', `${s.webhooks.enabled} enabled, ${s.webhooks.disabled} disabled; ${s.webhooks.pending_deliveries} deliveries pending`],
        ['database', `${humanBytes(s.database.size_bytes)} (+ ${humanBytes(s.database.wal_bytes)} write-ahead log)`],
      ]),
    )
  } finally {
    client.close()
  }
}

/** `relay admin agents [--status S] [--limit N] [--cursor C]`: every agent with its status, paged. */
async function agents(_args: string[], flags: Record<string, string>): Promise<void> {
  const status = flags.status
  if (status !== undefined && status !== 'active' && status !== 'suspended') throw new UsageError('--status must be active or suspended')
  const limit = flags.limit === undefined ? 100 : Number(flags.limit)
  if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) throw new UsageError('--limit must be an integer 1–10000')
  const { client } = await openExistingDataDir(flags)
  try {
    let page
    try {
      page = new StatsRepo(client).listAgents({ limit, after: flags.cursor, status })
    } catch {
      throw new UsageError('--cursor is not a cursor printed by relay admin agents')
    }
    if (flags.json === 'true') return printJson(page)
    print(
      table(
        ['public key', 'status', 'name', 'visibility', 'inbox', 'caps', 'last active'],
        page.agents.map((a) => [a.public_key, a.status, a.display_name, a.visibility, a.inbox_policy, a.capabilities, a.last_active_at]),
      ),
    )
    if (page.next_cursor) print(`more: relay admin agents --cursor ${page.next_cursor}${status ? ` --status ${status}` : ''} --limit ${limit}\n`)
  } finally {
    client.close()
  }
}

const ACTIONS: Record<string, Action> = {
  suspend: ([key], flags) => suspension('suspend', key, flags),
  unsuspend: ([key], flags) => suspension('unsuspend', key, flags),
  stats,
  agents,
}

/** `relay admin ACTION …`: operator commands on the data directory, while the relay runs or not. */
export async function admin(positionals: string[], flags: Record<string, string>): Promise<void> {
  const [action, ...rest] = positionals
  const run = ACTIONS[action ?? '']
  if (!run) throw new UsageError(`unknown admin command "${action ?? ''}" (suspend, unsuspend, stats, agents)`)
  await run(rest, flags)
}
