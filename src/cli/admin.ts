import { isPublicKey } from '../auth/keys.ts'
import { loadConfig } from '../config/load.ts'
import { systemClock } from '../lib/clock.ts'
import { silentLogger } from '../lib/logger.ts'
import type { Storage } from '../services/ports.ts'
import { openStorage } from '../storage/open-storage.ts'
import { prepareDataDir } from '../relay.ts'
import type { Database } from 'bun:sqlite'
import { AgentCache, SqliteAgentStore } from '../storage/sqlite/agents-store.ts'
import { openDatabase } from '../storage/sqlite/database.ts'
import { StatsRepo } from '../storage/sqlite/stats-repo.ts'
import { UsageError } from './args.ts'
import { openExistingDataDir } from './data-dir.ts'
import { fields, humanBytes, table } from './format.ts'

export const ADMIN_FLAGS = ['reason', 'data-dir', 'config', 'status', 'limit', 'cursor', 'note']
export const ADMIN_BOOLEANS = ['json']

/** Opens the relay database the way `serve` finds it (--data-dir, RELAY_DATA_DIR, config). */
export async function openDataDir(flags: Record<string, string>): Promise<Database> {
  const config = await loadConfig({ flags })
  return openDatabase(prepareDataDir(config.dataDir).database)
}

type Action = (args: string[], flags: Record<string, string>) => Promise<void>

const print = (text: string): void => void process.stdout.write(text)
const printJson = (value: unknown): void => print(JSON.stringify(value, null, 2) + '\n')

/** `relay admin suspend KEY [--reason TEXT]` / `relay admin unsuspend KEY` (docs/protocol.md §2.3). */
async function suspension(action: 'suspend' | 'unsuspend', key: string | undefined, flags: Record<string, string>): Promise<void> {
  if (!isPublicKey(key)) throw new UsageError(`${action} needs a public key (43 base64url characters)`)
  const db = await openDataDir(flags)
  try {
    const store = new SqliteAgentStore(db, new AgentCache())
    if (action === 'suspend') {
      await store.suspend(key, flags.reason ?? null, systemClock.now())
      print(`suspended ${key}\n`)
    } else {
      if (!(await store.unsuspend(key, systemClock.now()))) throw new Error(`no agent ${key}`)
      print(`unsuspended ${key}\n`)
    }
  } finally {
    db.close()
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

/** The relay's storage as a command beside it sees it (found like `serve` finds it). */
async function withStorage<T>(flags: Record<string, string>, run: (storage: Storage) => Promise<T>): Promise<T> {
  const config = await loadConfig({ flags })
  const { storage, signals } = openStorage(config, prepareDataDir(config.dataDir), silentLogger, systemClock, { tool: true })
  try {
    return await run(storage)
  } finally {
    await signals.close()
    await storage.close()
  }
}

/**
 * `relay admin allow KEY [--note TEXT]`, `relay admin revoke KEY`, `relay admin allowed [--json]`:
 * the allowlist of RELAY_ADMISSION=allowlist. A running relay applies changes within a second.
 */
async function allowlist(action: 'allow' | 'revoke', key: string | undefined, flags: Record<string, string>): Promise<void> {
  if (!isPublicKey(key)) throw new UsageError(`${action} needs a public key (43 base64url characters)`)
  await withStorage(flags, async (storage) => {
    if (action === 'allow') {
      const added = await storage.admission.allow(key, flags.note ?? null, systemClock.now())
      print(added ? `allowed ${key}\n` : `${key} was already allowed\n`)
    } else {
      if (!(await storage.admission.revoke(key))) throw new Error(`${key} is not on the allowlist`)
      print(`revoked ${key}\n`)
    }
  })
}

async function allowed(_args: string[], flags: Record<string, string>): Promise<void> {
  const entries = await withStorage(flags, (storage) => storage.admission.list())
  const json = entries.map((e) => ({ public_key: e.publicKey, note: e.note, created_at: new Date(e.createdAt).toISOString() }))
  if (flags.json === 'true') return printJson({ allowed: json })
  if (json.length === 0) return print('no key is allowed yet (relay admin allow KEY)\n')
  print(table(['public key', 'allowed since', 'note'], json.map((e) => [e.public_key, e.created_at, e.note ?? ''])))
}

const ACTIONS: Record<string, Action> = {
  allow: ([key], flags) => allowlist('allow', key, flags),
  revoke: ([key], flags) => allowlist('revoke', key, flags),
  allowed,
  suspend: ([key], flags) => suspension('suspend', key, flags),
  unsuspend: ([key], flags) => suspension('unsuspend', key, flags),
  stats,
  agents,
}

/** `relay admin ACTION …`: operator commands on the data directory, while the relay runs or not. */
export async function admin(positionals: string[], flags: Record<string, string>): Promise<void> {
  const [action, ...rest] = positionals
  const run = ACTIONS[action ?? '']
  if (!run) throw new UsageError(`unknown admin command "${action ?? ''}" (suspend, unsuspend, stats, agents, allow, revoke, allowed)`)
  await run(rest, flags)
}
