/**
 * The SQL migrations embedded into the binary as text. Add a line here for every file drizzle-kit
 * generates; a test checks this list against migrations/meta/_journal.json.
 */
import journal from '../../migrations/meta/_journal.json'
import m0000 from '../../migrations/0000_init.sql' with { type: 'text' }
import m0001 from '../../migrations/0001_discovery_index.sql' with { type: 'text' }
import m0002 from '../../migrations/0002_messages_expiry_order.sql' with { type: 'text' }

export const MIGRATION_SQL: Record<string, string> = {
  '0000_init': m0000,
  '0001_discovery_index': m0001,
  '0002_messages_expiry_order': m0002,
}

export const MIGRATION_JOURNAL: { entries: { idx: number; when: number; tag: string }[] } = journal
