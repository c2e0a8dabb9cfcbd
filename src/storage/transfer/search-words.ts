/**
 * The PostgreSQL storage keeps the words discovery searches (agent_words) in its agent store's code,
 * not in triggers, so rows copied straight into `agents` have none. This rebuilds them for the copied
 * agents, from the rows as they now stand in the target and with the store's own word splitting, so a
 * text search finds a migrated agent exactly as it finds one whose profile was saved there.
 */
import type { Database } from 'bun:sqlite'
import type { SQL } from 'bun'
import { profileWords } from '../postgres/agents-store.ts'
import { exec, rows } from '../postgres/db.ts'

/** Agents whose words are written per statement. */
const BATCH_AGENTS = 500

/** Rebuilds agent_words for every agent of `source`; nothing when the target has no such table. */
export async function rebuildSearchWords(source: Database, target: SQL): Promise<{ agents: number; words: number } | null> {
  const [{ exists }] = await rows<{ exists: boolean }>(target, `SELECT to_regclass('agent_words') IS NOT NULL AS exists`)
  if (!exists) return null
  let agents = 0
  let words = 0
  const rebuild = async (keys: string[]) => {
    // through the stores' helpers: text is escaped going in and unescaped coming out as they store it
    const profiles = await rows<{ public_key: string; display_name: string | null; capabilities: string }>(
      target,
      `SELECT public_key, display_name, capabilities FROM agents WHERE public_key = ANY($1::text[])`,
      [keys],
    )
    const owners: string[] = []
    const list: string[] = []
    for (const p of profiles) {
      for (const word of new Set(profileWords(p.display_name, p.capabilities))) {
        owners.push(p.public_key)
        list.push(word)
      }
    }
    agents += profiles.length
    if (list.length === 0) return
    words += await exec(target, `INSERT INTO agent_words (public_key, word) SELECT * FROM unnest($1::text[], $2::text[]) ON CONFLICT DO NOTHING`, [owners, list])
  }
  let keys: string[] = []
  for (const row of source.query<{ public_key: string }, []>(`SELECT public_key FROM agents`).iterate()) {
    keys.push(row.public_key)
    if (keys.length >= BATCH_AGENTS) {
      await rebuild(keys)
      keys = []
    }
  }
  if (keys.length > 0) await rebuild(keys)
  return { agents, words }
}
