import { isPublicKey } from '../auth/keys.ts'
import { loadConfig } from '../config/load.ts'
import { systemClock } from '../lib/clock.ts'
import { prepareDataDir } from '../relay.ts'
import { AgentsRepo } from '../storage/agents-repo.ts'
import { openDatabase, type Db } from '../storage/db.ts'
import { UsageError } from './args.ts'

/** Opens the relay database the way `serve` finds it (--data-dir, RELAY_DATA_DIR, config). */
export async function openDataDir(flags: Record<string, string>): Promise<Db> {
  const config = await loadConfig({ flags })
  return openDatabase(prepareDataDir(config.dataDir).database)
}

/** `relay admin suspend KEY [--reason TEXT]` / `relay admin unsuspend KEY` (SPEC §2.3). */
export async function admin(positionals: string[], flags: Record<string, string>): Promise<void> {
  const [action, key] = positionals
  if (action !== 'suspend' && action !== 'unsuspend') throw new UsageError(`unknown admin command "${action ?? ''}"`)
  if (!isPublicKey(key)) throw new UsageError(`${action} needs a public key (43 base64url characters)`)
  const db = await openDataDir(flags)
  try {
    const repo = new AgentsRepo(db)
    if (action === 'suspend') {
      repo.suspend(key, flags.reason ?? null, systemClock.now())
      process.stdout.write(`suspended ${key}\n`)
    } else {
      if (!repo.unsuspend(key, systemClock.now())) throw new Error(`no agent ${key}`)
      process.stdout.write(`unsuspended ${key}\n`)
    }
  } finally {
    db.$client.close()
  }
}
